package http_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// BenchmarkLoginTiming measures failed logins through the real server with
// the production password hashing (postgres.DefaultArgon2): for a user that
// does not exist and for one that does (wrong password). The two must cost
// the same, or the time tells which names exist. It reports the median of
// the b.N tries as ms/median:
//
//	go test -run '^$' -bench BenchmarkLoginTiming -benchtime 25x -count 5 ./controlplane/http/
func BenchmarkLoginTiming(b *testing.B) {
	e := newEnv(b, envOptions{argon2: &postgres.DefaultArgon2, settings: func(s *sluicehttp.Settings) {
		s.LoginThrottle = sluicehttp.ThrottleSettings{PerAccount: 1 << 30, PerClient: 1 << 30}
	}})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/users", map[string]any{"username": "ed", "password": password, "role": "editor"})
	anon := e.anon()
	anon.t = b
	// Tries alternate between the two names, in alternating order, so that
	// the machine's load weighs on both alike.
	var missing, existing []time.Duration
	try := func(user string) time.Duration {
		start := time.Now()
		anon.must(http.StatusUnauthorized, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": "wrong password"})
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			missing = append(missing, try("nobody"))
			existing = append(existing, try("ed"))
		} else {
			existing = append(existing, try("ed"))
			missing = append(missing, try("nobody"))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	m, x := median(missing), median(existing)
	b.ReportMetric(m, "missing-ms/median")
	b.ReportMetric(x, "existing-ms/median")
	b.ReportMetric(m/x, "missing/existing")
}
