package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSimulateAgainstPublished: the built sluicectl fetches the published
// version from a real control plane and replays the log through it and
// through the file, side by side: a tighter file rejects what the published
// rules admit.
func TestSimulateAgainstPublished(t *testing.T) {
	p := startPlane(t)
	published := writeFile(t, "shop.yaml", shopRules) // 100/s, burst 150
	r := p.as(t, p.adminToken, "apply", published, "--title", "shop rules").ok(t)
	id := opened(t, r)
	p.as(t, p.bobToken, "changes", "approve", id, "-n", "shop").ok(t)
	p.as(t, p.bobToken, "changes", "publish", id, "-n", "shop").ok(t)

	// The proposal: ten times tighter, the "missing zero".
	tight := writeFile(t, "shop.yaml", strings.NewReplacer("rate: 100", "rate: 10", "burst: 150", "burst: 15").Replace(shopRules))
	const perSec, secs = 300, 4
	log := writeFile(t, "access.log", simLog(perSec, secs))
	r = p.as(t, p.adminToken, "simulate", tight, "--log", log, "--against", "published", "-o", "json").ok(t)
	var out simulateOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Published == nil {
		t.Fatalf("simulate -o json: %v\n%s", err, r.stdout)
	}
	total := int64(perSec * secs)
	// A token bucket admits burst at the first second and rate each second after.
	wantFile, wantPub := int64(15+10*(secs-1)), int64(150+100*(secs-1))
	if f := out.File.Rules[0]; f.Admitted != wantFile || f.Rejected != total-wantFile {
		t.Fatalf("file: %+v, want %d admitted", f, wantFile)
	}
	if pub := out.Published.Rules[0]; out.Published.Version != 1 || pub.Admitted != wantPub || pub.Rejected != total-wantPub {
		t.Fatalf("published: version %d %+v, want version 1 admitting %d", out.Published.Version, pub, wantPub)
	}
	r = p.as(t, p.adminToken, "simulate", tight, "--log", log, "--against", "published").ok(t)
	row := fmt.Sprintf("%d %d %d 0 %d %d %d 0", total, wantFile, total-wantFile, total, wantPub, total-wantPub)
	found := false
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "orders-per-ip" {
			found = strings.Join(f[3:], " ") == row
			break // the table's row, not the top keys'
		}
	}
	if !found || !strings.Contains(r.stdout, "V1 REQUESTS") {
		t.Fatalf("simulate table:\n%s\nwant the row %q under both sides", r.stdout, row)
	}
}
