package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestScheduledPublishCLI: publish --at through the built binaries (the
// scheduler runs in sluice-admin): unschedule cancels, and a real two-second
// schedule is published at its time, by the scheduler, once.
func TestScheduledPublishCLI(t *testing.T) {
	p := startPlane(t)
	file := writeFile(t, "shop.yaml", shopRules)
	id := opened(t, p.as(t, p.adminToken, "apply", file, "--title", "shop rules").ok(t))
	p.as(t, p.bobToken, "changes", "approve", id, "-n", "shop").ok(t)

	r := p.as(t, p.bobToken, "changes", "publish", id, "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "-n", "shop").ok(t)
	if !strings.Contains(r.stdout, "scheduled: published at ") {
		t.Fatalf("publish --at: %q", r.stdout)
	}
	r = p.as(t, p.bobToken, "changes", "unschedule", id, "-n", "shop").ok(t)
	if !strings.Contains(r.stdout, "no longer scheduled") {
		t.Fatalf("unschedule: %q", r.stdout)
	}
	if r := p.as(t, p.bobToken, "changes", "unschedule", id, "-n", "shop"); r.code != 1 || !strings.Contains(r.stderr, "not scheduled") {
		t.Fatalf("unschedule twice: %+v, want exit 1 saying it is not scheduled", r)
	}
	if r := p.as(t, p.bobToken, "changes", "publish", id, "--at", "6pm", "-n", "shop"); r.code != 1 || !strings.Contains(r.stderr, "RFC 3339") {
		t.Fatalf("publish --at 6pm: %+v", r)
	}

	at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	p.as(t, p.bobToken, "changes", "publish", id, "--at", at.UTC().Format(time.RFC3339), "-n", "shop").ok(t)
	var ch struct {
		State            string `json:"state"`
		PublishedVersion int    `json:"publishedVersion"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_ = json.Unmarshal(p.call(t, p.bobToken, "GET", "/api/v1/namespaces/shop/changes/"+id, "", http.StatusOK), &ch)
		if ch.State == "published" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("change %s not published 20s after scheduling it for %v: %+v", id, at, ch)
		}
	}
	var vs struct {
		Items []struct {
			Number    int       `json:"number"`
			CreatedBy string    `json:"createdBy"`
			CreatedAt time.Time `json:"createdAt"`
		} `json:"items"`
	}
	_ = json.Unmarshal(p.call(t, p.bobToken, "GET", "/api/v1/namespaces/shop/versions", "", http.StatusOK), &vs)
	if len(vs.Items) != 1 || vs.Items[0].CreatedBy != "sluice" || vs.Items[0].CreatedAt.Before(at) || ch.PublishedVersion != 1 {
		t.Fatalf("versions = %+v, change = %+v; want version 1 by the scheduler at %v or later", vs.Items, ch, at)
	}
}
