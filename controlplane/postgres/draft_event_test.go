package postgres_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestDraftEvents: every save of a draft (a whole document, one rule put or
// deleted, a reset) records a draft event with the actor and the draft's
// new revision and ETag, the one GET .../draft then sends.
func TestDraftEvents(t *testing.T) {
	t.Parallel()
	db := testenv.MustOpen(t, postgres.Settings{})
	ctx := context.Background()
	users := postgres.NewUserService(db)
	alice := MustUser(t, users, "alice", sluice.RoleEditor)
	bob := MustUser(t, users, "bob", sluice.RoleAdmin)
	if err := postgres.NewNamespaceService(db).CreateNamespace(as(ctx, bob), &sluice.Namespace{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	drafts, events := postgres.NewDraftService(db), postgres.NewEventService(db)
	d, err := drafts.FindDraft(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	rs := &api.RuleSet{Namespace: "shop", Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}}}}
	d1, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: rs})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := drafts.UpdateDraft(as(ctx, bob), "shop", sluice.DraftUpdate{Kind: sluice.KindRoutes, ID: "orders", Delete: true})
	if err != nil {
		t.Fatal(err)
	}
	d3, err := drafts.ResetDraft(as(ctx, alice), "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A failed save (a stale revision) records nothing.
	if _, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: rs}); sluice.ErrorCode(err) != sluice.EPRECONDITION {
		t.Fatalf("stale save: %v", err)
	}
	list, _, err := events.FindEvents(ctx, sluice.EventFilter{Namespace: "shop", Kinds: []sluice.EventKind{sluice.EventDraft}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		actor, action string
		rev           int64
	}{{"alice", sluice.ActionDraftReset, d3.Revision}, {"bob", sluice.ActionDraftDeleteRule, d2.Revision}, {"alice", sluice.ActionDraftUpdate, d1.Revision}}
	if len(list) != len(want) {
		t.Fatalf("draft events: %+v", list)
	}
	for i, w := range want {
		e := list[i]
		var detail struct {
			Action   string `json:"action"`
			Object   string `json:"object"`
			Revision int64  `json:"revision"`
			ETag     string `json:"etag"`
		}
		if err := json.Unmarshal(e.Detail, &detail); err != nil {
			t.Fatal(err)
		}
		if e.Kind != sluice.EventDraft || e.Actor != w.actor || detail.Action != w.action || detail.Revision != w.rev ||
			detail.ETag != `"`+strconv.FormatInt(w.rev, 10)+`"` || detail.Object != "namespace/shop/draft"+map[bool]string{true: "/routes/orders"}[w.action == sluice.ActionDraftDeleteRule] {
			t.Fatalf("event %d: %+v detail %+v, want %+v", i, e, detail, w)
		}
	}
}
