package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestEvents: events are stored once per key, listed newest first or after
// an id, derived from the audit (a publish, a canary start, an emergency
// rollback as rollback), and pruned by age.
func TestEvents(t *testing.T) {
	t.Parallel()
	db := testenv.MustOpen(t, postgres.Settings{})
	ctx := context.Background()
	users := postgres.NewUserService(db)
	alice := MustUser(t, users, "alice", sluice.RoleEditor)
	bob := MustUser(t, users, "bob", sluice.RoleAdmin)
	if err := postgres.NewNamespaceService(db).CreateNamespace(as(ctx, bob), &sluice.Namespace{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	events := postgres.NewEventService(db)
	old := time.Now().Add(-40 * 24 * time.Hour)
	in := []*sluice.Event{
		{Namespace: "shop", At: old, Kind: sluice.EventDegrade, Node: "gw-1", Rule: "coupon", From: "0", To: "1", Key: "k1"},
		{Namespace: "shop", Kind: sluice.EventBreaker, Node: "gw-1", Rule: "up", From: "closed", To: "open", Key: "k2"},
	}
	got, err := events.RecordEvents(ctx, in)
	if err != nil || len(got) != 2 || got[0].ID == 0 || got[1].ID <= got[0].ID {
		t.Fatalf("RecordEvents: %+v %v", got, err)
	}
	again, err := events.RecordEvents(ctx, []*sluice.Event{{Namespace: "shop", Kind: sluice.EventDegrade, Key: "k1"}})
	if err != nil || len(again) != 0 {
		t.Fatalf("the same key again: %+v %v", again, err)
	}

	// A publish, then an emergency rollback: a publish event and a rollback
	// event, both from the audit, with their actor and version.
	drafts, changes, versions := postgres.NewDraftService(db), postgres.NewChangeService(db), postgres.NewVersionService(db)
	rs := &api.RuleSet{Namespace: "shop", Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}}}}
	for i := range 2 {
		d, err := drafts.FindDraft(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		rs.Routes[0].Upstream.Targets[0].URL = "http://127.0.0.1:808" + string(rune('1'+i))
		if _, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: rs}); err != nil {
			t.Fatal(err)
		}
		c := &sluice.Change{Namespace: "shop", Title: "v"}
		if err := changes.CreateChange(as(ctx, alice), c); err != nil {
			t.Fatal(err)
		}
		if _, err := changes.UpdateChange(as(ctx, bob), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve}); err != nil {
			t.Fatal(err)
		}
		if _, err := changes.PublishChange(as(ctx, bob), "shop", c.ID, sluice.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := versions.RollbackVersion(as(ctx, bob), "shop", 1, sluice.Rollback{Reason: "bad", Emergency: true}); err != nil {
		t.Fatal(err)
	}
	list, next, err := events.FindEvents(ctx, sluice.EventFilter{Namespace: "shop", Kinds: []sluice.EventKind{sluice.EventPublish, sluice.EventRollback}})
	if err != nil || next != 0 {
		t.Fatal(err, next)
	}
	if len(list) != 3 || list[0].Kind != sluice.EventRollback || list[0].Version != 3 || list[0].Actor != "bob" ||
		list[1].Kind != sluice.EventPublish || list[1].Version != 2 || list[2].Version != 1 {
		t.Fatalf("publish and rollback events (newest first) %+v", list)
	}
	// An audit-derived event carries its request id and client address,
	// and the rollback's reason in its after document.
	var detail struct {
		RequestID  string `json:"requestId"`
		ClientAddr string `json:"clientAddr"`
		After      struct {
			Reason string `json:"reason"`
		} `json:"after"`
	}
	if err := json.Unmarshal(list[0].Detail, &detail); err != nil || detail.RequestID != "test" || detail.ClientAddr != "127.0.0.1" || detail.After.Reason != "bad" {
		t.Errorf("rollback event detail %s (%v), want requestId test, clientAddr 127.0.0.1 and reason bad", list[0].Detail, err)
	}
	// Two draft saves, two publishes and a rollback.
	after, _, err := events.FindEvents(ctx, sluice.EventFilter{Namespace: "shop", After: got[1].ID})
	if err != nil || len(after) != 5 || after[0].Kind != sluice.EventDraft || after[0].ID <= got[1].ID || after[0].ID > after[1].ID {
		t.Fatalf("events after %d, oldest first: %+v %v", got[1].ID, after, err)
	}
	n, err := events.PruneEvents(ctx, time.Now().Add(-30*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PruneEvents: %d %v, want the one 40 days old", n, err)
	}
	if left, _, _ := events.FindEvents(ctx, sluice.EventFilter{Namespace: "shop", Kinds: []sluice.EventKind{sluice.EventDegrade}}); len(left) != 0 {
		t.Errorf("degrade events after pruning: %+v", left)
	}
}
