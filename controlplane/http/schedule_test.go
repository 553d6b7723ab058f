package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// scheduleApproved edits the draft to hold routes, opens a change as author and
// approves it as approver.
func scheduleApproved(t *testing.T, author, approver *client, routes ...string) sluice.Change {
	t.Helper()
	rs, etag := author.draft("shop")
	rs.Routes = nil
	for _, id := range routes {
		rs.Routes = append(rs.Routes, route(id))
	}
	author.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	author.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "routes " + strings.Join(routes, ",")}).decode(t, &ch)
	approver.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", ch.ID), nil).decode(t, &ch)
	return ch
}

// TestScheduledPublishHTTP: a change scheduled two seconds ahead through the
// API is published by the scheduler (the one sluice-admin runs) at its time,
// reaches etcd, and is audited with the scheduler as actor; bad schedules
// are refused; unschedule cancels.
func TestScheduledPublishHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()
	sched := postgres.NewScheduler(postgres.NewChangeService(e.db), 100*time.Millisecond, nil)
	sched.Start(context.Background())
	defer sched.Close()

	ch := scheduleApproved(t, ed, ap, "a")
	publish := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", ch.ID)
	unschedule := fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/unschedule", ch.ID)
	for _, tc := range []struct {
		desc   string
		who    *client
		body   any
		status int
		detail string
	}{
		{desc: "in the past", who: ap, body: map[string]any{"at": time.Now().Add(-time.Minute).Format(time.RFC3339)}, status: http.StatusBadRequest, detail: "at"},
		{desc: "not a time", who: ap, body: `{"at": "tomorrow"}`, status: http.StatusBadRequest},
		{desc: "in year 9999", who: ap, body: map[string]any{"at": "9999-12-31T00:00:00Z"}, status: http.StatusBadRequest, detail: "within a year"},
		{desc: "with a canary", who: ap, body: map[string]any{"at": time.Now().Add(time.Hour).Format(time.RFC3339), "canary": map[string]any{"selector": map[string]string{"zone": "a"}}},
			status: http.StatusBadRequest, detail: "canary"},
		{desc: "by an editor", who: ed, body: map[string]any{"at": time.Now().Add(time.Hour).Format(time.RFC3339)}, status: http.StatusForbidden},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := tc.who.must(tc.status, "POST", publish, tc.body)
			if p := r.problem(t); tc.detail != "" && !strings.Contains(string(r.body), tc.detail) {
				t.Fatalf("problem %+v does not name %q", p, tc.detail)
			}
		})
	}
	ap.must(http.StatusConflict, "POST", unschedule, nil) // not scheduled

	// Scheduled, then cancelled: stays approved, never published.
	var got sluice.Change
	ap.must(http.StatusAccepted, "POST", publish, map[string]any{"at": time.Now().Add(time.Hour).Format(time.RFC3339)}).decode(t, &got)
	if got.PublishAt == nil || got.ScheduledBy != "ap" {
		t.Fatalf("scheduled change = %+v", got)
	}
	ed.must(http.StatusForbidden, "POST", unschedule, nil)
	got = sluice.Change{}
	ap.must(http.StatusOK, "POST", unschedule, nil).decode(t, &got)
	if got.PublishAt != nil || got.State != sluice.ChangeApproved {
		t.Fatalf("unscheduled change = %+v", got)
	}

	// A real two-second schedule.
	at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	ap.must(http.StatusAccepted, "POST", publish, map[string]any{"at": at.Format(time.RFC3339)}).decode(t, &got)
	if !got.PublishAt.Equal(at) {
		t.Fatalf("publishAt = %v, want %v", got.PublishAt, at)
	}
	e.waitPublished("shop", 1, 15*time.Second)
	ed.must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d", ch.ID), nil).decode(t, &got)
	if got.State != sluice.ChangePublished || got.PublishedVersion == nil || *got.PublishedVersion != 1 {
		t.Fatalf("change after its time = %+v", got)
	}
	var vs struct {
		Items []sluice.Version `json:"items"`
	}
	ed.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions", nil).decode(t, &vs)
	if len(vs.Items) != 1 || vs.Items[0].CreatedAt.Before(at) || vs.Items[0].CreatedBy != postgres.SchedulerActor {
		t.Fatalf("versions = %+v, want one created at %v or later by the scheduler", vs.Items, at)
	}
	var evs struct {
		Items []sluice.AuditEvent `json:"items"`
	}
	ap.must(http.StatusOK, "GET", "/api/v1/audit?action="+sluice.ActionChangePublish, nil).decode(t, &evs)
	if len(evs.Items) != 1 || evs.Items[0].Actor != postgres.SchedulerActor || !strings.Contains(string(evs.Items[0].After), `"scheduledBy":"ap"`) {
		t.Fatalf("publish events = %+v", evs.Items)
	}
}
