package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/rulegen"
	"github.com/sluicegw/sluice/dataplane/metrics"
)

func benchOptions() Options {
	return Options{Metrics: metrics.New(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

// BenchmarkCompileSwap measures what a node does when a new version of a
// large rule set arrives: compile it against the snapshot in service (one
// limit changed, everything else carried over), swap it in and retire the
// old one. Target: 20k rules in ≤ 500 ms, linear in size.
func BenchmarkCompileSwap(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			var versions []*api.Valid
			for seed := range int64(2) {
				v, err := api.Validated(rulegen.Large(n, seed+1))
				if err != nil {
					b.Fatal(err)
				}
				versions = append(versions, v)
			}
			opts := benchOptions()
			var cur atomic.Pointer[Snapshot]
			first, err := Compile(context.Background(), versions[0], Meta{Version: 1}, nil, opts)
			if err != nil {
				b.Fatal(err)
			}
			cur.Store(first)
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				i++
				prev := cur.Load()
				next, err := Compile(context.Background(), versions[i%2], Meta{Version: int64(i + 1)}, prev, opts)
				if err != nil {
					b.Fatal(err)
				}
				cur.Store(next)
				prev.Retire(next)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
			cur.Load().Retire(nil)
		})
	}
}

// BenchmarkCompileLoad measures a node's first load of a large rule set:
// compile with nothing to carry over, swap in.
func BenchmarkCompileLoad(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			rs, err := api.Validated(rulegen.Large(n, 1))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				s, err := Compile(context.Background(), rs, Meta{Version: 1}, nil, benchOptions())
				if err != nil {
					b.Fatal(err)
				}
				s.Retire(nil)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system, every
// thread): a cost per operation that, unlike wall time, other work on a
// shared machine barely moves.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
