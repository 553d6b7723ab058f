package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReports1000Nodes: 1,000 simulated nodes (in this process) each
// write a report (3 limits, a breaker, a degrade rule, a latency histogram)
// every 5s, the default --report-interval, bound to a lease, into an
// embedded etcd. Rounds of 10s alternate without and with a ReportWatcher
// (the control plane's side: watch, decode, check, store in the Fleet);
// the process CPU of a round with the watcher minus the median of those
// without is the control plane's CPU. Reported: etcd writes/s (from the
// revision), control-plane CPU (cores), reports stored/s. Run with
//
//	go test -run '^$' -bench Reports1000Nodes -benchtime 1x ./controlplane/etcd/
func BenchmarkReports1000Nodes(b *testing.B) {
	const nodes, interval, round, rounds = 1000, 5 * time.Second, 10 * time.Second, 3
	srv := etcdtest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		b.Fatal(err)
	}
	keys := api.Keys{}
	rs := &api.RuleSet{Limits: []api.Limit{{ID: "l1"}, {ID: "l2"}, {ID: "l3"}}, Breakers: []api.Breaker{{ID: "b1"}}, Degrades: []api.Degrade{{ID: "d1"}}}
	bounds := api.LatencyBounds
	boot := time.Now()
	reports := make([]*api.Report, nodes)
	for n := range reports {
		// A report counts only from a node registered under its lease.
		if _, err := c.Put(ctx, keys.Node("bench", fmt.Sprintf("gw-%04d", n)), `{"address":"10.0.0.1:9000","version":1}`, clientv3.WithLease(lease.ID)); err != nil {
			b.Fatal(err)
		}
		reports[n] = &api.Report{NodeID: fmt.Sprintf("gw-%04d", n), BootID: "boot", BootAt: boot.UTC(), IntervalSeconds: 5, Version: 1,
			Latency:  api.LatencyCounts{Bounds: bounds, Counts: make([]int64, len(bounds)+1)},
			Limits:   []api.LimitCounts{{Rule: "l1"}, {Rule: "l2"}, {Rule: "l3"}},
			Breakers: []api.BreakerState{{Rule: "b1", State: "closed"}}, Degrades: []api.DegradeState{{Rule: "d1"}}}
	}
	var puts, failed atomic.Int64
	stop := make(chan struct{})
	work := make(chan int, nodes)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				r := reports[n]
				r.Seq++
				r.At = time.Now().UTC()
				r.Requests.Total += 500
				r.Requests.Class2xx += 500
				r.Limits[0].Allowed += 500
				for i := range r.Latency.Counts {
					r.Latency.Counts[i] += int64(500 * (i + 1) / len(r.Latency.Counts))
				}
				v, _ := json.Marshal(r)
				if _, err := c.Put(ctx, keys.Report("bench", r.NodeID), string(v), clientv3.WithLease(lease.ID)); err != nil {
					failed.Add(1)
					continue
				}
				puts.Add(1)
			}
		}()
	}
	// Node n reports at phase n·interval/nodes of every interval.
	go func() {
		t := time.NewTicker(interval / nodes)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-stop:
				close(work)
				return
			case <-t.C:
				work <- n % nodes
				n++
			}
		}
	}()
	rev := func() int64 {
		r, err := c.Get(ctx, "/none")
		if err != nil {
			b.Fatal(err)
		}
		return r.Header.Revision
	}
	time.Sleep(interval) // every node has reported once
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var without, with, writes, stored []float64
	b.ResetTimer()
	for range rounds {
		for _, watch := range []bool{false, true} {
			var w *etcd.ReportWatcher
			fleet := sluice.NewFleet(sluice.FleetSettings{Rules: func(context.Context, string, int64) (*api.RuleSet, error) { return rs, nil }})
			if watch {
				w = etcd.NewReportWatcher(etcd.ReportSettings{Client: c, Fleet: fleet, Keys: keys, Logger: logger,
					Namespaces: func(context.Context) ([]string, error) { return []string{"bench"}, nil }})
				w.Start(ctx)
				time.Sleep(time.Second) // the first list
			}
			cpu0, r0, t0 := cpuTime(), rev(), time.Now()
			s0, _ := fleet.Counts()
			time.Sleep(round)
			secs := time.Since(t0).Seconds()
			cores := (cpuTime() - cpu0).Seconds() / secs
			writes = append(writes, float64(rev()-r0)/secs)
			if watch {
				s1, refused := fleet.Counts()
				if len(refused) > 0 {
					b.Fatalf("refused %v", refused)
				}
				stored = append(stored, float64(s1-s0)/secs)
				with = append(with, cores)
				w.Close()
			} else {
				without = append(without, cores)
			}
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	cp := make([]float64, len(with))
	for i := range with {
		cp[i] = with[i] - med(without)
	}
	b.ReportMetric(med(writes), "etcd-writes/s")
	b.ReportMetric(med(cp), "cp-cores")
	b.ReportMetric(med(stored), "stored/s")
	b.ReportMetric(med(without), "base-cores")
	b.Logf("puts %d failed %d; process cores without watcher %v, with %v; stored/s %v; etcd writes/s %v", puts.Load(), failed.Load(), without, with, stored, writes)
}
