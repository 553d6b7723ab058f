package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestQuotaLoweredBelowUsage: with the Fleet's quota usage wired into the
// database (as sluice-admin does), POST …/draft/check and a change opened
// warn that a quota lowered below the heaviest caller's usage refuses that
// caller until the window ends, naming both; without usage the warning
// keeps its softer wording.
func TestQuotaLoweredBelowUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ed, ap := e.mustShop()
	rs, etag := ed.draft("shop")
	rs.Routes = []api.Route{route("a")}
	rs.Limits = []api.Limit{{ID: "daily", Routes: []string{"a"}, Key: []string{"ip"}, Algorithm: api.Quota, Rate: 1000,
		Calendar: api.CalendarDay, Timezone: "UTC", Scope: api.ScopeCluster}}
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	var ch sluice.Change
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "quota"}).decode(t, &ch)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/approve", ch.ID), map[string]string{"comment": "ok"})
	var v sluice.Version
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d/publish", ch.ID), nil).decode(t, &v)

	rs, etag = ed.draft("shop")
	rs.Limits[0].Rate = 100
	check := func() string {
		t.Helper()
		var c sluice.DraftCheck
		ed.must(http.StatusOK, "POST", "/api/v1/namespaces/shop/draft/check", rs).decode(t, &c)
		for _, w := range c.Warnings {
			if w.Code == api.WarnQuotaLowered {
				return w.Message
			}
		}
		return ""
	}
	if m := check(); !strings.Contains(m, "callers may already be over the new quota") {
		t.Fatalf("without usage: %q", m)
	}

	versions := postgres.NewVersionService(e.db)
	fleet := sluice.NewFleet(sluice.FleetSettings{Rules: func(ctx context.Context, ns string, n int64) (*api.RuleSet, error) {
		v, err := versions.FindVersion(ctx, ns, n)
		if err != nil {
			return nil, err
		}
		return sluice.DecodeDocument(v.Document)
	}})
	e.db.SetQuotaUsage(fleet.QuotaUsage)
	fleet.Register("shop", "gw-1", sluice.Registration{Lease: 9, Version: v.Number})
	now := time.Now().UTC()
	start, end, _ := rs.Limits[0].QuotaWindow(now)
	r := &api.Report{NodeID: "gw-1", BootID: "b", Seq: 1, At: now, Version: v.Number,
		Limits: []api.LimitCounts{{Rule: "daily", Allowed: 900}},
		Quotas: []api.QuotaUsage{{Rule: "daily", WindowStart: start, MaxUsed: 850, OverHalf: 2}}}
	if errs := r.Check(now, 0); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := fleet.Ingest(context.Background(), "shop", r, sluice.ReportKey{CreateRevision: 1, Lease: 9}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("quota daily lowered to 100; today's heaviest caller has already used 850: callers above 100 are refused until %s (2 callers had used over half of the old quota of 1000)",
		end.Format("2006-01-02 15:04 MST"))
	if m := check(); m != want {
		t.Fatalf("with usage: %q, want %q", m, want)
	}

	// A change opened now stores the same warning.
	ed.must(http.StatusOK, "PUT", "/api/v1/namespaces/shop/draft", rs, "If-Match: "+etag)
	ed.must(http.StatusCreated, "POST", "/api/v1/namespaces/shop/changes", map[string]string{"title": "lower"}).decode(t, &ch)
	var got sluice.Change
	ed.must(http.StatusOK, "GET", fmt.Sprintf("/api/v1/namespaces/shop/changes/%d", ch.ID), nil).decode(t, &got)
	found := false
	for _, w := range got.Warnings {
		found = found || w.Code == api.WarnQuotaLowered && w.Message == want
	}
	if !found {
		t.Fatalf("change warnings %+v, want %q", got.Warnings, want)
	}

	// Lowered to above the heaviest caller: no warning.
	rs.Limits[0].Rate = 900
	if m := check(); m != "" {
		t.Fatalf("lowered above the usage: %q", m)
	}
}
