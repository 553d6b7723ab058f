package http_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
)

// bigRuleSet is a namespace's rules with n rules: n/2 routes, each with a
// limit.
func bigRuleSet(ns string, n int) *api.RuleSet {
	rs := &api.RuleSet{Namespace: ns}
	for i := range n / 2 {
		id := "r" + strconv.Itoa(i)
		rs.Routes = append(rs.Routes, api.Route{ID: id, Match: api.Match{PathPrefix: "/" + id, Methods: []string{"GET", "POST"}},
			Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}})
		rs.Limits = append(rs.Limits, api.Limit{ID: "l" + strconv.Itoa(i), Routes: []string{id}, Key: []string{"ip"},
			Algorithm: api.TokenBucket, Rate: 100, Period: api.Duration(time.Second)})
	}
	return rs
}

type benchEnv struct {
	e            *env
	ed, ap, view *client
}

func newBenchEnv(b *testing.B, rules int) *benchEnv {
	e := newEnv(b, envOptions{})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "big"})
	be := &benchEnv{e: e,
		ed:   e.token(e.mustUser(admin, "ed", sluice.RoleEditor), sluice.RoleEditor),
		ap:   e.token(e.mustUser(admin, "ap", sluice.RoleApprover), sluice.RoleApprover),
		view: e.token(admin, sluice.RoleViewer)}
	_, etag := be.ed.draft("big")
	be.ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/big/draft", bigRuleSet("big", rules), "If-Match: "+etag)
	return be
}

// change edits one limit of the draft and opens a change.
func (be *benchEnv) change(b *testing.B, i int) int64 {
	be.ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/big/draft/limits/l"+strconv.Itoa(i%100),
		map[string]any{"algorithm": "token_bucket", "rate": 200 + i, "key": []string{"ip"}, "routes": []string{"r" + strconv.Itoa(i%100)}})
	var ch sluice.Change
	be.ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/big/changes", map[string]string{"title": fmt.Sprint("bench ", i)}).decode(b, &ch)
	return ch.ID
}

// BenchmarkApproveToEtcd10k measures approve → publish → the etcd key holds
// the new version, for a namespace of 10,000 rules (target ≤ 1 s).
func BenchmarkApproveToEtcd10k(b *testing.B) {
	be := newBenchEnv(b, 10_000)
	var total time.Duration
	var phases [3]time.Duration
	count := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := be.change(b, i)
		b.StartTimer()
		start := time.Now()
		be.ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/approve", id), nil)
		approved := time.Now()
		var v sluice.Version
		be.ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/publish", id), nil).decode(b, &v)
		published := time.Now()
		be.e.waitVersion("big", v.Number, 30*time.Second)
		landed := time.Now()
		total += landed.Sub(start)
		phases[0] += approved.Sub(start)
		phases[1] += published.Sub(approved)
		phases[2] += landed.Sub(published)
		count++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(count) }
	b.ReportMetric(ms(total), "ms/approve-to-etcd")
	b.ReportMetric(ms(phases[0]), "ms/approve")
	b.ReportMetric(ms(phases[1]), "ms/publish")
	b.ReportMetric(ms(phases[2]), "ms/etcd-written")
}

// BenchmarkReads10k measures GET draft, GET versions and GET a diff of two
// versions of a 10,000-rule namespace under 20 concurrent clients (target
// p99 ≤ 50 ms).
func BenchmarkReads10k(b *testing.B) {
	be := newBenchEnv(b, 10_000)
	for i := range 2 {
		id := be.change(b, i)
		be.ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/approve", id), nil)
		be.ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/big/changes/%d/publish", id), nil)
	}
	paths := []string{"/api/v1/namespaces/big/draft", "/api/v1/namespaces/big/versions", "/api/v1/namespaces/big/versions/1/diff/2"}
	for _, p := range paths { // warm the caches
		be.view.must(http.StatusOK, "GET", p, nil)
	}
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	b.SetParallelism(10) // × GOMAXPROCS (2) = 20 clients
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// A lean client, as one on another machine would be: the body is
		// read to the end and discarded, so that the client's own
		// allocations do not compete with the server for the two cores.
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		mine := map[string][]time.Duration{}
		for i := 0; pb.Next(); i++ {
			p := paths[i%len(paths)]
			req, _ := http.NewRequest("GET", be.e.srv.URL+p, nil)
			req.Header.Set("Authorization", "Bearer "+be.view.bearer)
			start := time.Now()
			res, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mine[p] = append(mine[p], time.Since(start))
			if res.StatusCode != http.StatusOK || n == 0 {
				b.Errorf("GET %s: %d", p, res.StatusCode)
				return
			}
		}
		mu.Lock()
		for p, d := range mine {
			lat[p] = append(lat[p], d...)
		}
		mu.Unlock()
	})
	b.StopTimer()
	var all []time.Duration
	for i, p := range paths {
		d := lat[p]
		all = append(all, d...)
		slices.Sort(d)
		if len(d) > 0 {
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, []string{"p99-draft-ms", "p99-versions-ms", "p99-diff-ms"}[i])
		}
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}
