package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestSharedBucketAcrossNamespaces: a service namespace's draft check and
// change warn (shared-bucket-mismatch) when a cluster limit names a bucket
// that a gateway namespace's published version names with other figures,
// and not when the figures agree or the bucket is another.
func TestSharedBucketAcrossNamespaces(t *testing.T) {
	t.Parallel()
	db := testenv.MustOpen(t, postgres.Settings{})
	ctx := context.Background()
	users := postgres.NewUserService(db)
	alice := MustUser(t, users, "alice", sluice.RoleEditor)
	bob := MustUser(t, users, "bob", sluice.RoleApprover)
	namespaces, drafts, changes := postgres.NewNamespaceService(db), postgres.NewDraftService(db), postgres.NewChangeService(db)
	for _, ns := range []string{"shop", "orders-svc"} {
		if err := namespaces.CreateNamespace(as(ctx, alice), &sluice.Namespace{Name: ns}); err != nil {
			t.Fatal(err)
		}
	}
	shared := func(id string, rate int64, bucket string) api.Limit {
		return api.Limit{ID: id, Algorithm: api.TokenBucket, Rate: rate, Burst: 300, Scope: api.ScopeCluster, Bucket: bucket}
	}
	gwLimit := shared("per-user", 300, "orders-per-user")
	gwLimit.Routes, gwLimit.Key = []string{"orders"}, []string{"header:X-User"}
	gateway := &api.RuleSet{Namespace: "shop",
		Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}}},
		Limits: []api.Limit{gwLimit}}
	rev := int64(1)
	if _, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &rev, RuleSet: gateway}); err != nil {
		t.Fatal(err)
	}
	c := &sluice.Change{Namespace: "shop", Title: "shared bucket"}
	if err := changes.CreateChange(as(ctx, alice), c); err != nil {
		t.Fatal(err)
	}
	if _, err := changes.UpdateChange(as(ctx, bob), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve}); err != nil {
		t.Fatal(err)
	}
	if _, err := changes.PublishChange(as(ctx, bob), "shop", c.ID, sluice.PublishOptions{}); err != nil {
		t.Fatal(err)
	}

	service := func(rate int64, bucket string) *api.RuleSet {
		l := shared("create-per-user", rate, bucket)
		l.Resources, l.Key = []string{"orders.Create"}, []string{"sdk:user"}
		return &api.RuleSet{Namespace: "orders-svc", Kind: api.KindService, Limits: []api.Limit{l}}
	}
	mismatches := func(ws []api.Warning) []string {
		var out []string
		for _, w := range ws {
			if w.Code == api.WarnSharedBucketMismatch {
				out = append(out, w.Path+": "+w.Message)
			}
		}
		return out
	}
	for _, tc := range []struct {
		desc   string
		rs     *api.RuleSet
		warned bool
	}{
		{"same figures", service(300, "orders-per-user"), false},
		{"another rate", service(200, "orders-per-user"), true},
		{"another bucket", service(200, "payments"), false},
	} {
		check, err := drafts.CheckDraft(ctx, "orders-svc", tc.rs)
		if err != nil || len(check.Errors) != 0 {
			t.Fatalf("%s: check %v %+v", tc.desc, err, check)
		}
		got := mismatches(check.Warnings)
		if tc.warned != (len(got) == 1) || tc.warned && !strings.Contains(got[0], "limits[create-per-user].bucket: ") ||
			tc.warned && !strings.Contains(got[0], "limit per-user of namespace shop") {
			t.Fatalf("%s: draft check's bucket warnings %q, want one: %v", tc.desc, got, tc.warned)
		}
	}

	// A change carries the warning too.
	if _, err := drafts.UpdateDraft(as(ctx, alice), "orders-svc", sluice.DraftUpdate{IfRevision: &rev, RuleSet: service(200, "orders-per-user")}); err != nil {
		t.Fatal(err)
	}
	sc := &sluice.Change{Namespace: "orders-svc", Title: "half a rollout"}
	if err := changes.CreateChange(as(ctx, alice), sc); err != nil {
		t.Fatal(err)
	}
	got, err := changes.FindChangeByID(ctx, "orders-svc", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m := mismatches(got.Warnings); len(m) != 1 {
		t.Fatalf("change warnings %+v, want one shared-bucket-mismatch", got.Warnings)
	}
}
