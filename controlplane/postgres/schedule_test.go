package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// clock is a settable clock shared by the DBs of a test.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// scheduleEnv is a namespace with an editor, an approver and a helper that
// opens and approves a change of one route to target url.
type scheduleEnv struct {
	db      *postgres.DB
	clock   *clock
	changes *postgres.ChangeService
	alice   *sluice.User // editor
	bob     *sluice.User // approver
}

func newScheduleEnv(t *testing.T) *scheduleEnv {
	t.Helper()
	clk := &clock{}
	clk.Set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	db := testenv.MustOpen(t, postgres.Settings{Now: clk.Now})
	users := postgres.NewUserService(db)
	e := &scheduleEnv{db: db, clock: clk, changes: postgres.NewChangeService(db),
		alice: MustUser(t, users, "alice", sluice.RoleEditor), bob: MustUser(t, users, "bob", sluice.RoleApprover)}
	if err := postgres.NewNamespaceService(db).CreateNamespace(as(context.Background(), e.alice), &sluice.Namespace{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *scheduleEnv) approved(t *testing.T, url string) *sluice.Change {
	t.Helper()
	ctx := context.Background()
	drafts := postgres.NewDraftService(e.db)
	d, err := drafts.FindDraft(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	rs := &api.RuleSet{Namespace: "shop", Routes: []api.Route{{ID: "orders", Upstream: api.Upstream{Targets: []api.Target{{URL: url}}}}}}
	if _, err := drafts.UpdateDraft(as(ctx, e.alice), "shop", sluice.DraftUpdate{IfRevision: &d.Revision, RuleSet: rs}); err != nil {
		t.Fatal(err)
	}
	c := &sluice.Change{Namespace: "shop", Title: "to " + url}
	if err := e.changes.CreateChange(as(ctx, e.alice), c); err != nil {
		t.Fatal(err)
	}
	got, err := e.changes.UpdateChange(as(ctx, e.bob), "shop", c.ID, sluice.ChangeUpdate{Decision: sluice.Approve})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *scheduleEnv) find(t *testing.T, id int64) *sluice.Change {
	t.Helper()
	c, err := e.changes.FindChangeByID(context.Background(), "shop", id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestScheduledPublish(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	c := e.approved(t, "http://127.0.0.1:8081")
	at := e.clock.Now().Add(time.Hour)
	got, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if got.PublishAt == nil || !got.PublishAt.Equal(at) || got.ScheduledBy != "bob" || got.State != sluice.ChangeApproved {
		t.Fatalf("scheduled change = %+v", got)
	}

	e.clock.Advance(time.Hour - time.Second)
	vs, err := e.changes.PublishDue(ctx)
	if err != nil || len(vs) != 0 {
		t.Fatalf("a second before its time: published %v, %v", vs, err)
	}
	e.clock.Advance(time.Second)
	vs, err = e.changes.PublishDue(ctx)
	if err != nil || len(vs) != 1 || vs[0].Number != 1 || vs[0].CreatedBy != postgres.SchedulerActor {
		t.Fatalf("at its time: published %+v, %v", vs, err)
	}
	if c := e.find(t, c.ID); c.State != sluice.ChangePublished || *c.PublishedVersion != 1 {
		t.Fatalf("change after its time = %+v", c)
	}
	if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("published again: %v, %v", vs, err)
	}
	evs, _, err := postgres.NewAuditService(e.db).FindAuditEvents(ctx, sluice.AuditFilter{Action: sluice.ActionChangePublish})
	if err != nil || len(evs) != 1 {
		t.Fatalf("publish events = %v, %v", evs, err)
	}
	var after struct {
		ScheduledBy string `json:"scheduledBy"`
	}
	if err := json.Unmarshal(evs[0].After, &after); err != nil || evs[0].Actor != postgres.SchedulerActor || after.ScheduledBy != "bob" {
		t.Fatalf("publish event = %+v", evs[0])
	}
	if ver, err := postgres.NewAuditService(e.db).VerifyAudit(ctx); err != nil || !ver.OK {
		t.Fatalf("verify = %+v %v", ver, err)
	}
}

func TestScheduleRefused(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	c := e.approved(t, "http://127.0.0.1:8081")
	for _, tc := range []struct {
		desc string
		who  *sluice.User
		at   time.Time
		code string
	}{
		{desc: "an editor", who: e.alice, at: e.clock.Now().Add(time.Hour), code: sluice.EFORBIDDEN},
		{desc: "a time in the past", who: e.bob, at: e.clock.Now().Add(-time.Second), code: sluice.EINVALID},
		{desc: "now", who: e.bob, at: e.clock.Now(), code: sluice.EINVALID},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := e.changes.ScheduleChange(as(ctx, tc.who), "shop", c.ID, tc.at); sluice.ErrorCode(err) != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
	if _, err := e.changes.UnscheduleChange(as(ctx, e.bob), "shop", c.ID); sluice.ErrorCode(err) != sluice.ECONFLICT {
		t.Fatalf("unscheduling a change that is not scheduled: %v", err)
	}
	if _, err := e.changes.PublishChange(as(ctx, e.bob), "shop", c.ID, sluice.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Hour)); sluice.ErrorCode(err) != sluice.ECONFLICT {
		t.Fatalf("scheduling a published change: %v", err)
	}
}

func TestUnschedule(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	c := e.approved(t, "http://127.0.0.1:8081")
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.changes.UnscheduleChange(as(ctx, e.alice), "shop", c.ID); sluice.ErrorCode(err) != sluice.EFORBIDDEN {
		t.Fatalf("an editor unscheduling: %v", err)
	}
	got, err := e.changes.UnscheduleChange(as(ctx, e.bob), "shop", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.PublishAt != nil || got.ScheduledBy != "" || got.State != sluice.ChangeApproved {
		t.Fatalf("unscheduled change = %+v", got)
	}
	e.clock.Advance(time.Hour)
	if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("an unscheduled change was published: %v, %v", vs, err)
	}
	evs, _, err := postgres.NewAuditService(e.db).FindAuditEvents(ctx, sluice.AuditFilter{Action: sluice.ActionChangeUnschedule})
	if err != nil || len(evs) != 1 || evs[0].Actor != "bob" {
		t.Fatalf("unschedule events = %+v, %v", evs, err)
	}
}

func TestScheduledStaleIsNotPublished(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	c := e.approved(t, "http://127.0.0.1:8081")
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Another change is published first: the scheduled one's base moved.
	other := e.approved(t, "http://127.0.0.1:8082")
	if _, err := e.changes.PublishChange(as(ctx, e.bob), "shop", other.ID, sluice.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if vs, err := e.changes.PublishDue(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("a stale change was published: %v, %v", vs, err)
	}
	got := e.find(t, c.ID)
	if !got.Stale || got.State != sluice.ChangeApproved || got.PublishAt != nil {
		t.Fatalf("stale change = %+v", got)
	}
	evs, _, err := postgres.NewAuditService(e.db).FindAuditEvents(ctx, sluice.AuditFilter{Action: sluice.ActionChangeScheduleSkip})
	if err != nil || len(evs) != 1 || evs[0].Actor != postgres.SchedulerActor {
		t.Fatalf("skip events = %+v, %v", evs, err)
	}
}

// Two schedulers (two replicas: two pools on one database) race on many due
// changes of several namespaces; each change is published exactly once.
func TestScheduledPublishExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newScheduleEnv(t)
	ctx := context.Background()
	other, err := postgres.Open(ctx, e.db.DSN(), postgres.Settings{Now: e.clock.Now, Argon2: testenv.FastArgon2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c := e.approved(t, "http://127.0.0.1:8081")
	if _, err := e.changes.ScheduleChange(as(ctx, e.bob), "shop", c.ID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	replicas := []*postgres.ChangeService{e.changes, postgres.NewChangeService(other)}
	var (
		mu        sync.Mutex
		published []int64
		wg        sync.WaitGroup
	)
	for range 4 {
		for _, r := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vs, err := r.PublishDue(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, v := range vs {
					published = append(published, v.Number)
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if len(published) != 1 || published[0] != 1 {
		t.Fatalf("published versions = %v, want [1]", published)
	}
	vs, _, err := postgres.NewVersionService(e.db).FindVersions(ctx, sluice.VersionFilter{Namespace: "shop"})
	if err != nil || len(vs) != 1 {
		t.Fatalf("versions = %v, %v", vs, err)
	}
}
