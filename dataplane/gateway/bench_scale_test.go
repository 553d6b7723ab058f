package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/internal/rulegen"
	"github.com/sluicegw/sluice/dataplane/source"
)

// BenchmarkApply measures what a node does with each new version of a large
// rule set, end to end: Node.Apply decodes the JSON document, validates it,
// computes its checksum, compiles the snapshot against the one in service
// (one limit changed) and swaps it in.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			var docs [2][]byte
			for i := range docs {
				var err error
				if docs[i], err = json.Marshal(rulegen.Large(n, int64(i+1))); err != nil {
					b.Fatal(err)
				}
			}
			node := New(Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
			if err := node.Apply(context.Background(), source.Update{Data: docs[0], Version: 1, Source: "bench"}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 1
			cpu0 := cpuTime()
			for b.Loop() {
				i++
				if err := node.Apply(context.Background(), source.Update{Data: docs[i%2], Version: int64(i), Source: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
			if s := node.current.Load(); s != nil {
				s.Retire(nil)
			}
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
