package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestScheduleRechecksTheScheduler: a publication scheduled by an approver
// who, by the time it is due, is disabled, downgraded or both is not
// published: the schedule is cancelled, audited by the scheduler actor with
// the reason, and raised as a publish event. (Issue 26: it was published
// on time by "sluice" with scheduledBy the disabled user.)
func TestScheduleRechecksTheScheduler(t *testing.T) {
	t.Parallel()
	viewer, editor := sluice.RoleViewer, sluice.RoleEditor
	yes := true
	for _, tc := range []struct {
		desc   string
		upd    sluice.UserUpdate
		reason string
	}{
		{desc: "disabled", upd: sluice.UserUpdate{Disabled: &yes}, reason: "bob, who scheduled it, is disabled"},
		{desc: "downgraded to editor", upd: sluice.UserUpdate{Role: &editor}, reason: "bob, who scheduled it, is now editor and no longer holds approver rights"},
		{desc: "downgraded and disabled", upd: sluice.UserUpdate{Role: &viewer, Disabled: &yes}, reason: "is disabled"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newScheduleEnv(t)
			ctx := context.Background()
			users := postgres.NewUserService(e.db)
			root := MustUser(t, users, "root", sluice.RoleAdmin)
			c := e.approved(t, "http://127.0.0.1:8081")
			if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := users.UpdateUser(as(ctx, root), e.bob.ID, tc.upd); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Hour)
			if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 0 {
				t.Fatalf("published %+v, %v; want nothing", vs, err)
			}
			if got := e.find(t, c.ID); got.State != sluice.ChangeApproved || got.PublishAt != nil || got.ScheduledBy != "" {
				t.Fatalf("change after its time = %+v", got)
			}
			evs, _, err := postgres.NewAuditService(e.db).FindAuditEvents(ctx, sluice.AuditFilter{Action: sluice.ActionChangeScheduleSkip})
			if err != nil || len(evs) != 1 || evs[0].Actor != postgres.SchedulerActor || !strings.Contains(string(evs[0].After), tc.reason) {
				t.Fatalf("skip audit = %+v, %v; want one by %s saying %q", evs, err, postgres.SchedulerActor, tc.reason)
			}
			events, _, err := postgres.NewEventService(e.db).FindEvents(ctx, sluice.EventFilter{Namespace: "shop", Kinds: []sluice.EventKind{sluice.EventPublish}})
			if err != nil || len(events) != 1 || events[0].To != "schedule_cancelled" || events[0].Actor != postgres.SchedulerActor ||
				!strings.Contains(string(events[0].Detail), tc.reason) {
				t.Fatalf("publish events = %+v, %v; want the cancelled schedule", events, err)
			}
		})
	}
}

// TestScheduleAdminScheduler: an admin who schedules, still an admin when
// it is due, has it published.
func TestScheduleAdminScheduler(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	root := MustUser(t, postgres.NewUserService(e.db), "Root", sluice.RoleAdmin)
	c := e.approved(t, "http://127.0.0.1:8081")
	if _, err := e.changes.ScheduleChange(as(ctx, root), "shop", c.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 1 {
		t.Fatalf("published %+v, %v; want one version", vs, err)
	}
}

// TestScheduleWithinAYear: a schedule more than a year ahead is EINVALID
// naming "at"; one within a year is accepted.
func TestScheduleWithinAYear(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	c := e.approved(t, "http://127.0.0.1:8081")
	for _, at := range []time.Time{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), e.clock.Now().Add(postgres.MaxScheduleAhead + time.Second)} {
		_, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, at)
		if f := sluice.ErrorFields(err); sluice.ErrorCode(err) != sluice.EINVALID || len(f) != 1 || f[0].Path != "at" || !strings.Contains(f[0].Message, "within a year") {
			t.Fatalf("scheduling for %s: %v %+v", at, err, f)
		}
	}
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(365*24*time.Hour)); err != nil {
		t.Fatalf("scheduling 365 days ahead: %v", err)
	}
}

// TestScheduledPublishesTheApprovedContent: what a schedule publishes is
// the change as approved, whatever the draft holds by then (a rate an
// editor or a rollback left there); and an emergency rollback published
// after the schedule makes the change stale, so it is cancelled rather than
// undoing the rollback.
func TestScheduledPublishesTheApprovedContent(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	drafts := postgres.NewDraftService(e.db)
	c := e.approved(t, "http://127.0.0.1:8081")
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	d, err := drafts.FindDraft(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	left := &api.RuleSet{Namespace: "shop", Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: "http://127.0.0.1:9999"}}}}}}
	if _, err := drafts.UpdateDraft(as(ctx, e.alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: left}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	vs, err := e.changes.PublishDue(ctx)
	if err != nil || len(vs) != 1 {
		t.Fatalf("published %+v, %v", vs, err)
	}
	v, err := postgres.NewVersionService(e.db).FindVersion(ctx, "shop", vs[0].Number)
	if err != nil {
		t.Fatal(err)
	}
	if v.Checksum != c.Checksum || !strings.Contains(string(v.Document), "127.0.0.1:8081") || strings.Contains(string(v.Document), "9999") {
		t.Fatalf("published %s (checksum %s), want the approved change's %s", v.Document, v.Checksum, c.Checksum)
	}

	// Scheduled, then an emergency rollback to version 1's rules elsewhere:
	// the schedule is cancelled as stale.
	next := e.approved(t, "http://127.0.0.1:8082")
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", next.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	third := e.approved(t, "http://127.0.0.1:8083")
	if _, err := e.changes.PublishChange(as(ctx, e.bob), "shop", third.ID, sluice.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	root := MustUser(t, postgres.NewUserService(e.db), "root", sluice.RoleAdmin)
	if _, _, err := postgres.NewVersionService(e.db).RollbackVersion(as(ctx, root), "shop", 1, sluice.Rollback{Reason: "incident", Emergency: true}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("published %+v, %v after the rollback; want nothing", vs, err)
	}
	evs, _, err := postgres.NewAuditService(e.db).FindAuditEvents(ctx, sluice.AuditFilter{Action: sluice.ActionChangeScheduleSkip})
	var after struct{ Reason string }
	if err != nil || len(evs) != 1 || json.Unmarshal(evs[0].After, &after) != nil || !strings.HasPrefix(after.Reason, "stale") {
		t.Fatalf("skip audit = %+v, %v", evs, err)
	}
}
