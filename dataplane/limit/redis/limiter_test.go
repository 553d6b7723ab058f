package redislimit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, url, cluster string
		want               string // single | failover | cluster, or "" for an error
		errHas             string
	}{
		{desc: "single", url: "redis://127.0.0.1:6379/2", want: "single"},
		{desc: "single with password", url: "redis://user:s3cret@127.0.0.1:6379", want: "single"},
		{desc: "tls", url: "rediss://cache.example:6380", want: "single"},
		{desc: "unix socket", url: "unix:///run/redis.sock", want: "single"},
		{desc: "sentinel", url: "redis://:s3cret@10.0.0.1:26379/0?master_name=mymaster&addr=10.0.0.2:26379", want: "failover"},
		{desc: "cluster list", cluster: "10.0.0.1:7000, 10.0.0.2:7000,10.0.0.3:7000", want: "cluster"},
		{desc: "cluster url", cluster: "redis://:s3cret@10.0.0.1:7000?addr=10.0.0.2:7000", want: "cluster"},
		{desc: "none", errHas: "set --redis or --redis-cluster"},
		{desc: "both", url: "redis://a:1", cluster: "b:2", errHas: "exclusive"},
		{desc: "bad scheme", url: "http://user:s3cret@h:1", errHas: "scheme"},
		{desc: "malformed with password", url: "redis://user:s3cret@[::1:6379", errHas: "malformed"},
		{desc: "malformed port with password", url: "redis://user:s3cret@host:99999999", errHas: "port"},
		{desc: "unknown parameter with password", url: "redis://user:s3cret@host:1?bogus=1", errHas: "bogus"},
		{desc: "no host", url: "redis://", errHas: "no host"},
		{desc: "cluster not host:port", cluster: "10.0.0.1", errHas: "not host:port"},
		{desc: "cluster bad port", cluster: "10.0.0.1:0", errHas: "bad port"},
		{desc: "cluster empty", cluster: " , ", errHas: "no addresses"},
		{desc: "cluster url bad scheme with password", cluster: "http://:s3cret@h:1", errHas: "scheme"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			o, err := parseFlags(tc.url, tc.cluster)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("parseFlags(%q, %q) = nil error, want one containing %q", tc.url, tc.cluster, tc.errHas)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("error %q does not contain %q", err, tc.errHas)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error shows the password: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%q, %q): %v", tc.url, tc.cluster, err)
			}
			got := map[bool]string{o.single != nil: "single", o.failover != nil: "failover", o.cluster != nil: "cluster"}[true]
			if got != tc.want {
				t.Errorf("kind = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExactAlgorithms(t *testing.T) {
	t.Parallel()
	url := mustSharedRedis(t)
	st := mustStore(t, Settings{URL: url, Prefix: freshPrefix(t)})
	ctx := context.Background()
	for _, alg := range []api.Algorithm{api.TokenBucket, api.FixedWindow, api.SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			lim := mustLimiter(t, st, api.Limit{ID: "a-" + strings.ReplaceAll(string(alg), "_", "-"), Algorithm: alg, Rate: 5, Period: api.Duration(time.Minute)})
			for i := range 5 {
				d, err := lim.Take(ctx, "k", 1, limit.Now())
				if err != nil || !d.Allowed {
					t.Fatalf("take %d: %+v, %v; want allowed", i, d, err)
				}
				if d.Remaining != int64(4-i) || d.Limit != 5 || d.Reset <= 0 {
					t.Errorf("take %d: remaining %d limit %d reset %v; want %d, 5, > 0", i, d.Remaining, d.Limit, d.Reset, 4-i)
				}
			}
			d, err := lim.Take(ctx, "k", 1, limit.Now())
			if err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("6th take: %+v, %v; want rejected with a RetryAfter", d, err)
			}
			if d, _ := lim.Take(ctx, "other{key}", 5, limit.Now()); !d.Allowed {
				t.Errorf("another key is limited with the first: %+v", d)
			}
			if d, _ := lim.Take(ctx, "big", 6, limit.Now()); d.Allowed {
				t.Errorf("cost above capacity allowed: %+v", d)
			}
			lim.Refund(ctx, "k", 2, limit.Now())
			for i := range 2 {
				if d, err := lim.Take(ctx, "k", 1, limit.Now()); err != nil || !d.Allowed {
					t.Fatalf("take %d after refunding 2: %+v, %v", i, d, err)
				}
			}
			if d, _ := lim.Take(ctx, "k", 1, limit.Now()); d.Allowed {
				t.Errorf("refund gave back more than 2: %+v", d)
			}
		})
	}
}

// TestTokenBucketRefills checks the GCRA refill against Redis' clock: a
// 20/s bucket emptied refills one unit per 50 ms.
func TestTokenBucketRefills(t *testing.T) {
	t.Parallel()
	st := mustStore(t, Settings{URL: mustSharedRedis(t), Prefix: freshPrefix(t)})
	lim := mustLimiter(t, st, api.Limit{Algorithm: api.TokenBucket, Rate: 20, Burst: 2, Period: api.Duration(time.Second)})
	ctx := context.Background()
	for range 2 {
		if d, _ := lim.Take(ctx, "k", 1, limit.Now()); !d.Allowed {
			t.Fatal("burst not available")
		}
	}
	d, _ := lim.Take(ctx, "k", 1, limit.Now())
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 50*time.Millisecond {
		t.Fatalf("empty bucket: %+v; want rejected, RetryAfter in (0, 50ms]", d)
	}
	time.Sleep(d.RetryAfter + 5*time.Millisecond) // Redis' clock, not ours, decides
	if d, _ := lim.Take(ctx, "k", 1, limit.Now()); !d.Allowed {
		t.Errorf("no refill after RetryAfter: %+v", d)
	}
}

func TestScriptReloadAfterFlush(t *testing.T) {
	t.Parallel()
	srv := startRedis(t, 0) // SCRIPT FLUSH must not touch the shared Redis
	st := mustStore(t, Settings{URL: srv.url()})
	lim := mustLimiter(t, st, api.Limit{Algorithm: api.FixedWindow, Rate: 3, Period: api.Duration(time.Hour)})
	ctx := context.Background()
	if _, err := lim.Take(ctx, "k", 1, limit.Now()); err != nil {
		t.Fatal(err)
	}
	c := srv.client(t)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := lim.Take(ctx, "k", 1, limit.Now())
	if err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v; want allowed, remaining 1", d, err)
	}
	ok, err := fixedWindowScript.Exists(ctx, c).Result()
	if err != nil || !ok[0] {
		t.Errorf("script not loaded again: %v %v", ok, err)
	}
}

// TestCorruptStateRepaired: a cluster limit key holding state no script
// writes (another type, junk, NaN, t=1e17, a future window, a count above the
// rate; each made permanent with PERSIST) is rewritten from scratch, for every algorithm
// and mode: the request is decided as for a fresh key (allowed, no store
// error, breaker closed), the repair is counted in sluice_store_repairs_total
// and the key is left valid with a TTL, so the next request needs no repair.
func TestCorruptStateRepaired(t *testing.T) {
	t.Parallel()
	url := mustSharedRedis(t)
	m := metrics.New()
	prefix := freshPrefix(t)
	// One failure would open the breaker (a repair must not count as one);
	// a deadline a loaded machine keeps.
	st := mustStore(t, Settings{URL: url, Prefix: prefix, Metrics: m, FailuresToOpen: 1, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	raw := st.client
	ctx := context.Background()
	hset := func(fields ...any) func(string) error {
		return func(k string) error { return raw.HSet(ctx, k, fields...).Err() }
	}
	future := fmt.Sprint(1e17) // µs: year 5138
	junk := []struct {
		desc  string
		write func(key string) error
	}{
		{"string", func(k string) error { return raw.Set(ctx, k, "hello", time.Minute).Err() }},
		{"list", func(k string) error { return raw.RPush(ctx, k, "a", "b").Err() }},
		{"non-numeric fields", hset("t", "abc", "c", "x", "w", "abc", "n", "x", "l", "y", "p", "z")},
		{"nan", hset("t", "nan", "c", "nan", "w", "nan", "n", "nan", "l", "nan", "p", "nan")},
		{"t=1e17 c=nan", hset("t", future, "c", "nan", "w", "1", "n", "nan", "l", "1000", "p", "0")},
		{"inf", hset("t", "inf", "c", "inf", "w", "inf", "n", "inf", "l", "inf", "p", "inf")},
		{"negative", hset("t", "1", "c", "-5", "w", "1", "n", "-3", "l", "-1", "p", "-1")},
		{"missing field", hset("t", "1", "w", "1")},
		{"far future, persisted", func(k string) error {
			// Well-formed numbers an attacker or a bug could leave: a TAT and
			// a window in the year 5138, a count over the rate, and no TTL.
			return hset("t", future, "c", "1000000", "w", future, "n", "1000", "l", "1000", "c2", "0", "p", "0")(k)
		}},
		{"count above capacity", func(k string) error {
			now, err := raw.Time(ctx).Result()
			if err != nil {
				return err
			}
			// Windows: this window's count at 5× the rate. Token bucket: a
			// TAT 100 s ahead under a 1 s tolerance (what it holds is more
			// than a bucket can).
			win := fmt.Sprint(now.UnixMicro() / 1e6)
			tat := fmt.Sprint(now.UnixMicro() + 100e6)
			return hset("t", tat, "c", "1000000", "w", win, "n", "5000", "l", "1000", "p", "5000")(k)
		}},
	}
	for _, alg := range []api.Algorithm{api.TokenBucket, api.FixedWindow, api.SlidingWindow} {
		for _, mode := range []api.ClusterMode{api.ModeExact, api.ModeBatched} {
			lim := mustLimiter(t, st, api.Limit{ID: "bad", Algorithm: alg, Rate: 1000, Period: api.Duration(time.Second),
				Mode: mode, OnStoreError: api.OnStoreErrorDeny})
			for _, j := range junk {
				t.Run(string(alg)+"/"+string(mode)+"/"+j.desc, func(t *testing.T) {
					key := j.desc + string(mode)
					rk := lim.(interface{ key(string) string }).key(key)
					if err := j.write(rk); err != nil {
						t.Fatal(err)
					}
					if err := raw.Persist(ctx, rk).Err(); err != nil {
						t.Fatal(err)
					}
					errsBefore := testutil.ToFloat64(m.StoreErrors.WithLabelValues("redis"))
					before := testutil.ToFloat64(m.StoreRepairs.WithLabelValues("redis"))
					d, err := lim.Take(ctx, key, 1, limit.Now())
					if err != nil || !d.Allowed {
						t.Fatalf("Take on corrupt state = %+v, %v; want allowed as a fresh key", d, err)
					}
					if after := testutil.ToFloat64(m.StoreRepairs.WithLabelValues("redis")); after != before+1 {
						t.Errorf("sluice_store_repairs_total went %v → %v, want +1", before, after)
					}
					if after := testutil.ToFloat64(m.StoreErrors.WithLabelValues("redis")); after != errsBefore {
						t.Errorf("a repair counted as a store error: %v → %v", errsBefore, after)
					}
					if st.open.Load() {
						t.Errorf("corrupt data opened the breaker")
					}
					// The rewritten key is a hash with a TTL, or already gone
					// (a token bucket's expires when it is full again: 2 ms).
					if typ, _ := raw.Type(ctx, rk).Result(); typ != "none" {
						if typ != "hash" {
							t.Errorf("repaired key has type %q", typ)
						}
						if ttl, err := raw.PTTL(ctx, rk).Result(); err != nil || ttl == -1*time.Nanosecond { // -1: no TTL
							t.Errorf("repaired key has PTTL %v, %v; want a TTL", ttl, err)
						}
					}
					for range 3 {
						if d, err := lim.Take(ctx, key, 1, limit.Now()); err != nil || !d.Allowed {
							t.Fatalf("Take after repair = %+v, %v", d, err)
						}
					}
					if after := testutil.ToFloat64(m.StoreRepairs.WithLabelValues("redis")); after != before+1 {
						t.Errorf("repaired again: sluice_store_repairs_total %v → %v", before, after)
					}
				})
			}
		}
	}
}

// TestPersistedValidKeyHeals: a key that lost its TTL (PERSIST) but holds
// possible values is no repair: the request is decided on it, and the write
// of the grant sets a TTL again.
func TestPersistedValidKeyHeals(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	st := mustStore(t, Settings{URL: mustSharedRedis(t), Prefix: freshPrefix(t), Metrics: m})
	ctx := context.Background()
	for _, alg := range []api.Algorithm{api.TokenBucket, api.FixedWindow, api.SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			lim := mustLimiter(t, st, api.Limit{ID: "p" + strings.ReplaceAll(string(alg), "_", ""), Algorithm: alg, Rate: 1000, Period: api.Duration(time.Second)})
			if d, err := lim.Take(ctx, "k", 1, limit.Now()); err != nil || !d.Allowed {
				t.Fatalf("first Take = %+v, %v", d, err)
			}
			rk := lim.(interface{ key(string) string }).key("k")
			if err := st.client.Persist(ctx, rk).Err(); err != nil {
				t.Fatal(err)
			}
			if d, err := lim.Take(ctx, "k", 1, limit.Now()); err != nil || !d.Allowed {
				t.Fatalf("Take on the persisted key = %+v, %v", d, err)
			}
			if ttl, _ := st.client.PTTL(ctx, rk).Result(); ttl <= 0 {
				t.Errorf("PTTL after a grant = %v, want a TTL again", ttl)
			}
			if n := testutil.ToFloat64(m.StoreRepairs.WithLabelValues("redis")); n != 0 {
				t.Errorf("counted %v repairs", n)
			}
		})
	}
}

// TestCanceledCallerDoesNotOpenBreaker: a client that went away cancels its
// context; that says nothing about Redis and must not open the breaker.
func TestCanceledCallerDoesNotOpenBreaker(t *testing.T) {
	t.Parallel()
	st := mustStore(t, Settings{URL: mustSharedRedis(t), Prefix: freshPrefix(t), FailuresToOpen: 1})
	lim := mustLimiter(t, st, api.Limit{Algorithm: api.TokenBucket, Rate: 10, Period: api.Duration(time.Second), OnStoreError: api.OnStoreErrorDeny})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		if _, err := lim.Take(ctx, "k", 1, limit.Now()); err == nil {
			t.Fatal("Take with a canceled context succeeded")
		}
	}
	if st.open.Load() {
		t.Fatal("canceled callers opened the breaker")
	}
	if d, err := lim.Take(context.Background(), "k", 1, limit.Now()); err != nil || !d.Allowed {
		t.Errorf("Take after: %+v, %v", d, err)
	}
}
