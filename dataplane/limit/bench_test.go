package limit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicegw/sluice/api"
)

const benchBurst = 100

// benchRate is the rate (per second) of the token-bucket benchmarks, for both
// this package and its peer x/time/rate: half the rate at which this
// package's limiter decides serially (the fastest of several short runs, so
// that a busy machine does not skew it), so that with the real clock about
// half of its calls are denied. denied/op reports the actual share.
var benchRate = sync.OnceValue(func() int64 {
	lo := mustLocal(nil, api.Limit{Algorithm: api.TokenBucket, Rate: 1 << 30, Burst: 1 << 30})
	const n = 200_000
	best := time.Duration(1 << 62)
	for range 10 {
		start := time.Now()
		for range n {
			lo.TakeHash(0, 1, Now())
		}
		best = min(best, time.Since(start)/n)
	}
	return int64(time.Second / (2 * max(best, 1)))
})

func benchTokenBucket() *Local {
	return mustLocal(nil, api.Limit{Algorithm: api.TokenBucket, Rate: benchRate(), Period: api.Duration(time.Second), Burst: benchBurst})
}

func reportDenied(b *testing.B, denied int64) {
	b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
}

// BenchmarkTokenBucket measures one global token-bucket decision with the
// production clock (Now), mixed allow/deny. Peer: BenchmarkXTimeRate.
func BenchmarkTokenBucket(b *testing.B) {
	benchRate() // calibrate outside every timed loop
	b.Run("serial", func(b *testing.B) {
		lo := benchTokenBucket()
		b.ReportAllocs()
		var denied int64
		for b.Loop() {
			if !lo.TakeHash(0, 1, Now()).Allowed {
				denied++
			}
		}
		reportDenied(b, denied)
	})
	b.Run("parallel", func(b *testing.B) {
		lo := benchTokenBucket()
		b.ReportAllocs()
		var denied atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			n := int64(0)
			for pb.Next() {
				if !lo.TakeHash(0, 1, Now()).Allowed {
					n++
				}
			}
			denied.Add(n)
		})
		reportDenied(b, denied.Load())
	})
	b.Run("limiter-interface", func(b *testing.B) {
		var lim Limiter = benchTokenBucket()
		ctx := context.Background()
		b.ReportAllocs()
		var denied int64
		for b.Loop() {
			if d, _ := lim.Take(ctx, "", 1, Now()); !d.Allowed {
				denied++
			}
		}
		reportDenied(b, denied)
	})
}

// BenchmarkXTimeRate is the peer of BenchmarkTokenBucket: x/time/rate's
// Allow with the same rate and burst.
func BenchmarkXTimeRate(b *testing.B) {
	benchRate()
	newPeer := func() *rate.Limiter { return rate.NewLimiter(rate.Limit(benchRate()), benchBurst) }
	b.Run("serial", func(b *testing.B) {
		l := newPeer()
		b.ReportAllocs()
		var denied int64
		for b.Loop() {
			if !l.Allow() {
				denied++
			}
		}
		reportDenied(b, denied)
	})
	b.Run("parallel", func(b *testing.B) {
		l := newPeer()
		b.ReportAllocs()
		var denied atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			n := int64(0)
			for pb.Next() {
				if !l.Allow() {
					n++
				}
			}
			denied.Add(n)
		})
		reportDenied(b, denied.Load())
	})
}

// BenchmarkClock compares the production clock with time.Now.
func BenchmarkClock(b *testing.B) {
	b.Run("Now", func(b *testing.B) {
		var s int64
		for b.Loop() {
			s += Now()
		}
		_ = s
	})
	b.Run("time.Now", func(b *testing.B) {
		var s int64
		for b.Loop() {
			s += time.Now().UnixNano()
		}
		_ = s
	})
}

const keyedKeys = 1 << 20

// keyed is the 1M-key fixture, built once: key strings, and a token-bucket
// limit (default MaxKeys, 1<<20) holding every key, with its memory.
var keyed = sync.OnceValue(func() (f struct {
	keys        []string
	lo          *Local
	bytesPerKey float64
}) {
	f.keys = make([]string, keyedKeys)
	for i := range f.keys {
		f.keys[i] = fmt.Sprintf("198.51.%d.%d/user-%d", i>>16, i&0xffff, i)
	}
	l := (&api.RuleSet{Limits: []api.Limit{{Algorithm: api.TokenBucket, Rate: 10, Key: []string{"ip"}}}}).Normalize().Limits[0]
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lo, err := NewLocal(l, 0)
	if err != nil {
		panic(err)
	}
	ctx, now := context.Background(), Now()
	for _, k := range f.keys {
		lo.Take(ctx, k, 1, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	f.lo = lo
	f.bytesPerKey = float64(after.HeapAlloc-before.HeapAlloc) / float64(lo.Len())
	return f
})

// BenchmarkKeyed1M measures lookup + decide (hash the key string, find the
// key among 1M, take a token) and reports the memory per key, index
// included. Peer: the same with a sync.Map of x/time/rate limiters (no bound,
// no expiry), the usual hand-rolled keyed limiter.
func BenchmarkKeyed1M(b *testing.B) {
	b.Run("limit", func(b *testing.B) {
		f := keyed()
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f.lo.Take(ctx, f.keys[i&(keyedKeys-1)], 1, Now())
			i += 7919 // a prime stride: cache-unfriendly, like real traffic
		}
		b.ReportMetric(f.bytesPerKey, "bytes/key")
		b.ReportMetric(float64(f.lo.Len()), "keys")
	})
	b.Run("parallel", func(b *testing.B) {
		f := keyed()
		ctx := context.Background()
		b.ReportAllocs()
		var seed atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(1)) * 104729
			for pb.Next() {
				f.lo.Take(ctx, f.keys[i&(keyedKeys-1)], 1, Now())
				i += 7919
			}
		})
		b.ReportMetric(f.bytesPerKey, "bytes/key")
	})
	b.Run("sync.Map-x-time-rate", func(b *testing.B) {
		f := keyed()
		var m sync.Map
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, k := range f.keys {
			l := rate.NewLimiter(10, 10)
			l.Allow()
			m.Store(k, l)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			v, _ := m.Load(f.keys[i&(keyedKeys-1)])
			v.(*rate.Limiter).Allow()
			i += 7919
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keyedKeys, "bytes/key")
	})
}

// BenchmarkAdmit measures a whole Admit for a route with two limits (per-ip
// token bucket and a global fixed window), allowed, headers included.
func BenchmarkAdmit(b *testing.B) {
	s, err := Compile(normalized([]api.Limit{
		{ID: "per-ip", Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: 1 << 30},
		{ID: "global", Algorithm: api.FixedWindow, Rate: 1 << 30},
	}), nil, Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := s.Chain("orders")
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	info := RequestInfo{RouteID: "orders", ClientIP: netip.MustParseAddr("192.0.2.1"), RequestID: "r"}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Header())
		done, ok := c.Admit(w, r, info)
		if !ok {
			b.Fatal("rejected")
		}
		done()
	}
}
