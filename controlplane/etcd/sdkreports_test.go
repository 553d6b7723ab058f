package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/dataplane/sdk"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// TestSDKReports: a service running the SDK (registered with kind sdk)
// reports as a gateway node does, and the control plane's real
// ReportWatcher and Fleet take its reports (lease checked against the
// registration, rules against the published version): its guarded calls,
// refusals and failures reach live traffic, and the report names the
// resource rule's counts.
func TestSDKReports(t *testing.T) {
	t.Parallel()
	const ns, node = "orders-svc", "orders-1"
	srv := etcdtest.Start(t)
	c, err := etcd.NewClient(srv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	keys := api.Keys{Prefix: "/sdkrep"}
	rs, err := api.Decode([]byte("namespace: orders-svc\nkind: service\nlimits:\n  - {id: publishes, resources: [queue.Publish], algorithm: token_bucket, rate: 2, period: 1h}\n" +
		"breakers:\n  - {id: db, resources: [db.Insert], window: 10s, minRequests: 100, errorRatio: 0.5, openFor: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := json.Marshal(api.Published{Version: 1, Checksum: rs.Checksum(), PublishedAt: time.Now().UTC(), PublishedBy: "test", Rules: rs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Put(ctx, keys.RuleSet(ns), string(pub)); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	fleet := sluice.NewFleet(sluice.FleetSettings{Rules: func(_ context.Context, n string, v int64) (*api.RuleSet, error) {
		if n != ns || v != 1 {
			return nil, errors.New("no such version")
		}
		return rs, nil
	}})
	w := etcd.NewReportWatcher(etcd.ReportSettings{Client: c, Fleet: fleet, Events: &memEvents{}, Keys: keys, Logger: discard,
		Namespaces: func(context.Context) ([]string, error) { return []string{ns}, nil }})
	w.Start(ctx)
	t.Cleanup(w.Close)

	g, err := sdk.New(ctx, sdk.Config{Namespace: ns, NodeID: node, Service: "orders", Etcd: srv.Endpoints, EtcdPrefix: "/sdkrep",
		InsecureAcceptUnsigned: true, ReportInterval: 20 * time.Millisecond, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ok := func(context.Context) error { return nil }
	for i := range 3 {
		err := g.Do(ctx, "queue.Publish", nil, ok)
		var rej *sdk.Rejected
		if (i < 2) != (err == nil) || i == 2 && (!errors.As(err, &rej) || rej.Rule != "publishes") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := g.Do(ctx, "db.Insert", nil, func(context.Context) error { return errors.New("db down") }); err == nil {
		t.Fatal("fn's error lost")
	}

	// Live traffic: the Fleet's stats of the node count the four calls.
	deadline := time.Now().Add(20 * time.Second)
	var requests, rejected, e5xx float64
	for {
		st, err := fleet.FindStats(ctx, sluice.StatsQuery{Namespace: ns, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		requests, rejected, e5xx = 0, 0, 0
		for _, s := range st.Nodes {
			for _, p := range s.Points {
				requests, rejected, e5xx = requests+p[1], rejected+p[2], e5xx+p[5]
			}
		}
		if requests >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if requests != 4 || rejected != 1 || e5xx != 1 {
		_, refused := fleet.Counts()
		t.Fatalf("live traffic of the sdk node: %v requests, %v rejected, %v 5xx; want 4, 1, 1 (refused reports %v)", requests, rejected, e5xx, refused)
	}
	if _, refused := fleet.Counts(); len(refused) > 0 {
		for _, n := range refused {
			if n > 0 {
				t.Fatalf("reports refused: %v", refused)
			}
		}
	}

	// The report itself: bound to the registration's lease, the rule's
	// counts by id.
	resp, err := c.Get(ctx, keys.Report(ns, node))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("report key: %v %v", resp, err)
	}
	r, err := api.DecodeReport(node, resp.Kvs[0].Value, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Limits) != 1 || !reflect.DeepEqual(r.Limits[0], api.LimitCounts{Rule: "publishes", Allowed: 2, Rejected: 1}) || r.Version != 1 ||
		len(r.Breakers) != 1 || r.Breakers[0].Rule != "db" || r.Breakers[0].State != "closed" {
		t.Fatalf("report %+v", r)
	}
	regResp, err := c.Get(ctx, keys.Node(ns, node))
	if err != nil || len(regResp.Kvs) != 1 || regResp.Kvs[0].Lease != resp.Kvs[0].Lease {
		t.Fatalf("registration %v and report lease %x: %v", regResp, resp.Kvs[0].Lease, err)
	}
	reg, err := api.DecodeRegistration(node, regResp.Kvs[0].Value)
	if err != nil || reg.Kind != api.NodeKindSDK || reg.Service != "orders" {
		t.Fatalf("registration %+v: %v", reg, err)
	}
}
