package postgres_test

import (
	"context"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestReviewedRollbackMarksVersion: a rollback opened as a change, approved
// and published, makes a version marked as a rollback of its target (as an
// emergency one is), and its event is a rollback, not a plain publish.
func TestReviewedRollbackMarksVersion(t *testing.T) {
	t.Parallel()
	db := testenv.MustOpen(t, postgres.Settings{})
	ctx := context.Background()
	users := postgres.NewUserService(db)
	alice := MustUser(t, users, "alice", sluice.RoleEditor)
	bob := MustUser(t, users, "bob", sluice.RoleApprover)
	if err := postgres.NewNamespaceService(db).CreateNamespace(as(ctx, alice), &sluice.Namespace{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	drafts := postgres.NewDraftService(db)
	changes := postgres.NewChangeService(db)
	publish := func(rate int64) {
		t.Helper()
		d, err := drafts.FindDraft(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		rs := &api.RuleSet{Namespace: "shop", Limits: []api.Limit{{ID: "l", Algorithm: "fixed_window", Rate: rate, Period: api.Duration(60e9)}}}
		if _, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: rs}); err != nil {
			t.Fatal(err)
		}
		c := &sluice.Change{Namespace: "shop", Title: "rate"}
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
	publish(100)
	publish(2)
	versions := postgres.NewVersionService(db)
	c, _, err := versions.RollbackVersion(as(ctx, alice), "shop", 1, sluice.Rollback{Reason: "too tight"})
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.RollbackOf == nil || *c.RollbackOf != 1 {
		t.Fatalf("rollback change = %+v", c)
	}
	if _, err := changes.UpdateChange(as(ctx, bob), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve}); err != nil {
		t.Fatal(err)
	}
	v, err := changes.PublishChange(as(ctx, bob), "shop", c.ID, sluice.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RollbackOf == nil || *v.RollbackOf != 1 {
		t.Fatalf("published rollback v%d has rollbackOf %v, want 1", v.Number, v.RollbackOf)
	}
	got, err := versions.FindVersion(ctx, "shop", v.Number)
	if err != nil {
		t.Fatal(err)
	}
	if got.RollbackOf == nil || *got.RollbackOf != 1 {
		t.Fatalf("stored v%d has rollbackOf %v, want 1", got.Number, got.RollbackOf)
	}
	events, _, err := postgres.NewEventService(db).FindEvents(ctx, sluice.EventFilter{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var kind sluice.EventKind
	for _, e := range events {
		if e.Version == v.Number {
			kind = e.Kind
		}
	}
	if kind != sluice.EventRollback {
		t.Fatalf("event of v%d is %q, want %q", v.Number, kind, sluice.EventRollback)
	}
}
