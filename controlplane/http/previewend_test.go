package http_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// TestPreviewEndsWithItsChange: a change's preview stops when the change
// is rejected, edited (reopened: rebased on a newer version) or published
// through the API: the etcd value is deleted (the nodes drop it within a
// report interval) and the stop is audited with the reason. A change that
// ends by another path (here a rejection through the service, as the
// scheduler publishes) has its preview stopped by the control plane's sweep
// (EndStalePreview), audited as the sweeper; a preview of a change still
// open stays.
func TestPreviewEndsWithItsChange(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := api.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	var keys api.Keys
	var previews *etcd.PreviewService
	var changes *postgres.ChangeService
	e := newEnv(t, envOptions{settings: func(s *sluicehttp.Settings) {
		n := s.Nodes.(*etcd.NodeService)
		keys = n.Keys
		changes = s.Changes.(*postgres.ChangeService)
		previews = &etcd.PreviewService{Client: n.Client, Keys: n.Keys, Changes: changes, Results: changes, Audit: s.Audit,
			Fleet: &fakeFleet{reports: map[string]*api.Report{}}, Signer: signer}
		s.Previews = previews
	}})
	admin, ed, ap := e.mustShop()
	base := "/api/v1/namespaces/shop"
	open := func(rate int64) int64 {
		t.Helper()
		rs, etag := ed.draft("shop")
		rs.Routes = []api.Route{route("api")}
		rs.Limits = []api.Limit{{ID: "per-ip", Routes: []string{"api"}, Key: []string{"ip"}, Algorithm: api.TokenBucket, Rate: rate, Period: api.Duration(time.Second)}}
		ed.must(http.StatusOK, "PUT", base+"/draft", rs, "If-Match: "+etag)
		var ch sluice.Change
		ed.must(http.StatusCreated, "POST", base+"/changes", map[string]string{"title": fmt.Sprint("rate ", rate)}).decode(t, &ch)
		return ch.ID
	}
	preview := func(id int64) {
		t.Helper()
		ed.must(http.StatusOK, "POST", fmt.Sprintf("%s/changes/%d/preview", base, id), map[string]string{"duration": "10m"})
	}
	running := func() string {
		t.Helper()
		res, err := e.etcd.Get(context.Background(), keys.Preview("shop"))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Kvs) == 0 {
			return ""
		}
		payload, _, err := signer.Verifier().Open(keys.Preview("shop"), res.Kvs[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		var pv api.Preview
		if err := json.Unmarshal(payload, &pv); err != nil {
			t.Fatal(err)
		}
		return pv.Change
	}
	stops := func() []string {
		t.Helper()
		var evs struct {
			Items []struct {
				Action, Actor string
				After         json.RawMessage
			}
		}
		admin.must(http.StatusOK, "GET", "/api/v1/audit?namespace=shop&action="+sluice.ActionPreviewStop, nil).decode(t, &evs)
		var out []string
		for _, ev := range evs.Items {
			var after struct{ Reason string }
			_ = json.Unmarshal(ev.After, &after)
			out = append(out, ev.Actor+":"+after.Reason)
		}
		return out
	}

	// finished: GET answers the change's kept preview, ended for why.
	finished := func(id int64, why string) {
		t.Helper()
		var p sluice.Preview
		ed.must(http.StatusOK, "GET", fmt.Sprintf("%s/changes/%d/preview", base, id), nil).decode(t, &p)
		if p.Change != id || p.State != sluice.PreviewFinished || p.Reason != why || p.EndedAt == nil || len(p.Rules) != 1 || p.Rules[0].Rule != "per-ip" {
			t.Fatalf("finished preview of change %d: %+v, want reason %q", id, p, why)
		}
	}

	// Rejected.
	a := open(10)
	preview(a)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("%s/changes/%d/reject", base, a), map[string]string{"comment": "no"})
	if c := running(); c != "" {
		t.Fatalf("after the rejection the preview of change %s runs", c)
	}
	finished(a, sluice.PreviewEndRejected)

	// Edited: b goes stale (c is published), is previewed, then reopened
	// (rebased). Publishing c stops nothing of b's.
	b := open(20)
	c := open(30)
	preview(b)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("%s/changes/%d/approve", base, c), map[string]string{"comment": "ok"})
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("%s/changes/%d/publish", base, c), nil)
	if got := running(); got != fmt.Sprint(b) {
		t.Fatalf("publishing another change stopped b's preview: %q", got)
	}
	ed.must(http.StatusOK, "POST", fmt.Sprintf("%s/changes/%d/reopen", base, b), map[string]string{"comment": "rebase"})
	if got := running(); got != "" {
		t.Fatalf("after the reopen the preview of change %s runs", got)
	}
	finished(b, sluice.PreviewEndEdited)

	// Published.
	preview(b)
	ap.must(http.StatusOK, "POST", fmt.Sprintf("%s/changes/%d/approve", base, b), map[string]string{"comment": "ok"})
	ap.must(http.StatusCreated, "POST", fmt.Sprintf("%s/changes/%d/publish", base, b), nil)
	if got := running(); got != "" {
		t.Fatalf("after the publication the preview of change %s runs", got)
	}
	finished(b, sluice.PreviewEndPublished) // the latest preview of b

	// The sweep: an open change's preview stays; once the change is
	// rejected by a path that does not stop it, the sweep does.
	d := open(40)
	preview(d)
	if why, err := previews.EndStalePreview(context.Background(), "shop"); err != nil || why != "" {
		t.Fatalf("sweep of an open change's preview: %q %v", why, err)
	}
	actx := sluice.NewContextWithActor(context.Background(), sluice.Actor{User: &sluice.User{ID: 999, Username: "ap2", Role: sluice.RoleApprover}, Role: sluice.RoleApprover})
	if _, err := changes.UpdateChange(actx, "shop", d, sluice.ChangeUpdate{Decision: sluice.Reject, Comment: "no"}); err != nil {
		t.Fatal(err)
	}
	if got := running(); got != fmt.Sprint(d) {
		t.Fatalf("the service's rejection stopped the preview: %q", got)
	}
	if why, err := previews.EndStalePreview(context.Background(), "shop"); err != nil || why != sluice.PreviewEndRejected || running() != "" {
		t.Fatalf("sweep of a rejected change's preview: %q %v, running %q", why, err, running())
	}
	finished(d, sluice.PreviewEndRejected)
	ed.must(http.StatusNotFound, "GET", fmt.Sprintf("%s/changes/%d/preview", base, c), nil) // never previewed

	want := []string{"sluice:rejected", "ap:published", "ed:edited", "ap:rejected"} // newest first
	if got := stops(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audited stops %q, want %q", got, want)
	}
}
