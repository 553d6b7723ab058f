package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

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
			versions := []*api.RuleSet{rulegen.Large(n, 1), rulegen.Large(n, 2)}
			for _, rs := range versions {
				if err := rs.Validate(); err != nil {
					b.Fatal(err)
				}
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
			cur.Load().Retire(nil)
		})
	}
}

// BenchmarkCompileLoad measures a node's first load of a large rule set:
// compile with nothing to carry over, swap in.
func BenchmarkCompileLoad(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			rs := rulegen.Large(n, 1)
			b.ReportAllocs()
			for b.Loop() {
				s, err := Compile(context.Background(), rs, Meta{Version: 1}, nil, benchOptions())
				if err != nil {
					b.Fatal(err)
				}
				s.Retire(nil)
			}
		})
	}
}
