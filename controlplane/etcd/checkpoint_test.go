package etcd_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

// TestAuditCheckpointNeverMovesBack: concurrent replicas may save heads out
// of order; the newest stays.
func TestAuditCheckpointNeverMovesBack(t *testing.T) {
	e := etcdtest.Start(t)
	client, err := etcd.NewClient(e.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	cp := &etcd.AuditCheckpoint{Client: client, Keys: api.Keys{Prefix: "/cp-test"}}
	ctx := context.Background()
	if h, err := cp.LoadAuditHead(ctx); err != nil || h != nil {
		t.Fatalf("empty: %+v %v", h, err)
	}
	for _, tc := range []struct {
		desc string
		save int64
		want int64
	}{
		{"first head", 5, 5},
		{"an older head is ignored", 3, 5},
		{"the same head again", 5, 5},
		{"a newer head", 9, 9},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := cp.SaveAuditHead(ctx, sluice.AuditHead{ID: tc.save, MAC: fmt.Sprint("mac", tc.save)}); err != nil {
				t.Fatal(err)
			}
			h, err := cp.LoadAuditHead(ctx)
			if err != nil || h == nil || h.ID != tc.want || h.MAC != fmt.Sprint("mac", tc.want) {
				t.Fatalf("head %+v %v, want id %d", h, err, tc.want)
			}
		})
	}
	if got := etcd.AuditHeadKey(api.Keys{}); got != "/sluice/v1/audit/head" {
		t.Fatalf("default key %q", got)
	}
}
