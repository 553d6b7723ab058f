package breaker

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sony/gobreaker/v2"
)

// benchRule is the settings every breaker benchmark uses: 10s window, error
// ratio 0.5 over at least 20 calls, slow calls over 1s, open 5s, 3 probes.
func benchRule() api.Breaker {
	return testRule(func(b *api.Breaker) {
		b.MinRequests = 20
		b.SlowCallRatio, b.SlowCallDuration = 0.5, api.Duration(time.Second)
	})
}

// newGobreaker returns the peer: sony/gobreaker's two-step breaker with the
// nearest equivalent settings (same window as its Interval, same open period
// and probes, a ReadyToTrip on the same ratio and minimum).
func newGobreaker() *gobreaker.TwoStepCircuitBreaker[any] {
	return gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
		Name:        "bench",
		MaxRequests: 3,
		Interval:    10 * time.Second,
		Timeout:     5 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.Requests >= 20 && float64(c.TotalFailures) >= 0.5*float64(c.Requests)
		},
	})
}

var sink atomic.Int64

// BenchmarkHealthyPath measures Allow+Done on a closed breaker. "none" is the
// call on a route without a rule (a nil *Breaker); "sluice" passes a
// precomputed now, "sluice+clock" reads Now() once per request as the
// gateway does; "gobreaker" is sony/gobreaker/v2's TwoStep Allow/done, which
// reads time.Now itself.
func BenchmarkHealthyPath(b *testing.B) {
	cases := []struct {
		name string
		run  func(pb func() bool)
	}{
		{"none", func(next func() bool) {
			var br *Breaker
			now := int64(0)
			for next() {
				now++
				t, err := br.Allow(now)
				if err != nil {
					sink.Add(1)
				}
				br.Done(t, now, false, time.Millisecond)
			}
		}},
		{"sluice", nil},
		{"sluice+clock", nil},
		{"gobreaker", nil},
	}
	sl := MustBreaker(b, benchRule())
	cases[1].run = func(next func() bool) {
		now := Now()
		for next() {
			now += 100
			t, err := sl.Allow(now)
			if err != nil {
				sink.Add(1)
			}
			sl.Done(t, now, false, time.Millisecond)
		}
	}
	sc := MustBreaker(b, benchRule())
	cases[2].run = func(next func() bool) {
		for next() {
			now := Now()
			t, err := sc.Allow(now)
			if err != nil {
				sink.Add(1)
			}
			sc.Done(t, Now(), false, time.Millisecond)
		}
	}
	gb := newGobreaker()
	cases[3].run = func(next func() bool) {
		for next() {
			done, err := gb.Allow()
			if err != nil {
				sink.Add(1)
				continue
			}
			done(true)
		}
	}
	for _, c := range cases {
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			c.run(b.Loop)
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) { c.run(pb.Next) })
		})
	}
}

// BenchmarkOpen measures the refusal path (Allow on an open breaker), which
// is what a failing upstream's traffic costs.
func BenchmarkOpen(b *testing.B) {
	br := MustBreaker(b, benchRule())
	now := int64(1000 * sec)
	for range 20 {
		call(br, now, true, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(now); !errors.Is(err, ErrOpen) {
			b.Fatal("not open")
		}
	}
}
