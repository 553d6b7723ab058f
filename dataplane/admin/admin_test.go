package admin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_test_total", Help: "x"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	ready := errors.New("no rules")
	h := New(Settings{
		Token:    "s3cret",
		Status:   func() any { return map[string]int{"version": 7} },
		Ready:    func() error { return ready },
		Gatherer: reg,
	})
	tests := []struct {
		desc, remote, path, auth string
		want                     int
		body                     string
	}{
		{desc: "loopback status", remote: "127.0.0.1:5000", path: "/status", want: 200, body: `"version": 7`},
		{desc: "ipv6 loopback", remote: "[::1]:5000", path: "/status", want: 200},
		{desc: "remote without token", remote: "10.1.2.3:5000", path: "/status", want: 401},
		{desc: "remote with wrong token", remote: "10.1.2.3:5000", path: "/status", auth: "Bearer nope", want: 401},
		{desc: "remote with token", remote: "10.1.2.3:5000", path: "/status", auth: "Bearer s3cret", want: 200},
		{desc: "remote healthz is open", remote: "10.1.2.3:5000", path: "/healthz", want: 200},
		{desc: "readyz reports the reason", remote: "10.1.2.3:5000", path: "/readyz", want: 503, body: "no rules"},
		{desc: "metrics", remote: "127.0.0.1:1", path: "/metrics", want: 200, body: "sluice_test_total"},
		{desc: "unknown path", remote: "127.0.0.1:1", path: "/nope", want: 404},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.path, nil)
			r.RemoteAddr, r.Host = tc.remote, "127.0.0.1:9901"
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("%s %s from %s = %d %q, want %d containing %q", r.Method, tc.path, tc.remote, w.Code, w.Body.String(), tc.want, tc.body)
			}
		})
	}
}

func TestNoTokenRefusesRemote(t *testing.T) {
	t.Parallel()
	h := New(Settings{})
	r := httptest.NewRequest("GET", "/status", nil)
	r.RemoteAddr, r.Host = "192.0.2.1:1", "127.0.0.1:9901"
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("got %d", w.Code)
	}
}
