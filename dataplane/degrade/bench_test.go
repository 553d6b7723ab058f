package degrade

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sony/gobreaker/v2"
)

var sink atomic.Int64

// BenchmarkHealthyPath measures Admit+Record at level 0 in auto mode. "none"
// is a route without a rule (a nil *Controller); "sluice" passes a
// precomputed now, "sluice+clock" reads Now() once per call as the gateway
// does; "gobreaker" is the named peer from the breaker benchmarks
// (sony/gobreaker/v2 TwoStep Allow/done), the nearest off-the-shelf per-request
// guard.
func BenchmarkHealthyPath(b *testing.B) {
	mk := func() *Controller {
		return MustCompile(b, []api.Degrade{autoRule(func(d *api.Degrade) {
			d.Triggers.Level1.QPSAbove, d.Triggers.Level2.QPSAbove = 1e12, 2e12
		})}, nil, Options{}).ForRoute("r")
	}
	run := func(c *Controller, clock bool) func(func() bool) {
		return func(next func() bool) {
			now := Now()
			key := uint64(0)
			for next() {
				if clock {
					now = Now()
				} else {
					now += 100
				}
				key += 0x9e3779b97f4a7c15
				if shed, _ := c.Admit(key, now); shed {
					sink.Add(1)
					continue
				}
				c.Record(now, true)
			}
		}
	}
	gb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench", Interval: time.Second, Timeout: 5 * time.Second})
	cases := []struct {
		name string
		run  func(func() bool)
	}{
		{"none", run(nil, false)},
		{"sluice", run(mk(), false)},
		{"sluice+clock", run(mk(), true)},
		{"gobreaker", func(next func() bool) {
			for next() {
				done, err := gb.Allow()
				if err != nil {
					sink.Add(1)
					continue
				}
				done(true)
			}
		}},
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

// BenchmarkShed measures Admit at level 1 (half the clients shed, every shed
// counted and offered to the log bucket) with the key hash of a request.
func BenchmarkShed(b *testing.B) {
	c := MustCompile(b, []api.Degrade{{ID: "m", Mode: api.DegradeManual, Level: 1}}, nil, Options{Logger: quiet}).ForRoute("r")
	b.ReportAllocs()
	now := Now()
	key := uint64(0)
	for b.Loop() {
		key += 0x9e3779b97f4a7c15
		now += 100
		if shed, _ := c.Admit(key, now); shed {
			sink.Add(1)
		}
	}
}
