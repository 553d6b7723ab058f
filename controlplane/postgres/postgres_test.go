package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func as(ctx context.Context, u *sluice.User) context.Context {
	return sluice.NewContextWithActor(ctx, sluice.Actor{User: u, Role: u.Role, RequestID: "test", ClientAddr: "127.0.0.1"})
}

func MustUser(tb testing.TB, users *postgres.UserService, name string, role sluice.Role) *sluice.User {
	tb.Helper()
	u := &sluice.User{Username: name, Role: role}
	if err := users.CreateUser(context.Background(), u, "correct horse battery"); err != nil {
		tb.Fatalf("creating user %s: %v", name, err)
	}
	return u
}

func TestWorkflowAndOutbox(t *testing.T) {
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
	rs := &api.RuleSet{Namespace: "shop", Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:8081"}}}}}}
	rev := int64(1)
	d, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &rev, RuleSet: rs})
	if err != nil {
		t.Fatal(err)
	}
	if d.Revision != 2 {
		t.Fatalf("revision = %d", d.Revision)
	}
	if _, err := drafts.UpdateDraft(as(ctx, alice), "shop", sluice.DraftUpdate{IfRevision: &rev, RuleSet: rs}); sluice.ErrorCode(err) != sluice.EPRECONDITION {
		t.Fatalf("stale If-Match: %v", err)
	}
	changes := postgres.NewChangeService(db)
	c := &sluice.Change{Namespace: "shop", Title: "first"}
	if err := changes.CreateChange(as(ctx, alice), c); err != nil {
		t.Fatal(err)
	}
	if _, err := changes.UpdateChange(as(ctx, alice), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve}); sluice.ErrorCode(err) != sluice.EFORBIDDEN {
		t.Fatalf("self-approval: %v", err)
	}
	got, err := changes.UpdateChange(as(ctx, bob), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve, Comment: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sluice.ChangeApproved || got.Diff.Added != 1 {
		t.Fatalf("change = %+v diff %+v", got, got.Diff)
	}
	v, err := changes.PublishChange(as(ctx, bob), "shop", c.ID, sluice.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 1 || v.Checksum != rs.Checksum() {
		t.Fatalf("version = %+v", v)
	}
	outbox := postgres.NewOutbox(db)
	names, err := outbox.PendingNamespaces(ctx)
	if err != nil || len(names) != 1 {
		t.Fatalf("pending = %v %v", names, err)
	}
	claim, err := outbox.ClaimPublication(ctx, "shop")
	if err != nil || claim == nil {
		t.Fatalf("claim = %v %v", claim, err)
	}
	// A second claimer (another replica) gets nothing while the first holds it.
	if other, err := outbox.ClaimPublication(ctx, "shop"); err != nil || other != nil {
		t.Fatalf("second claim = %v %v", other, err)
	}
	if err := claim.Finish(ctx, sluice.PublishOutcome{Revision: 42}); err != nil {
		t.Fatal(err)
	}
	got2, err := postgres.NewVersionService(db).FindVersion(ctx, "shop", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got2.Publication.State != sluice.PublicationPublished || *got2.Publication.EtcdRevision != 42 {
		t.Fatalf("publication = %+v", got2.Publication)
	}
	ver, err := postgres.NewAuditService(db).VerifyAudit(ctx)
	if err != nil || !ver.OK || ver.Checked < 6 {
		t.Fatalf("verify = %+v %v", ver, err)
	}
}
