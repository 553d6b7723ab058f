package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/dataplane/replay"
)

// simLog is a combined log of one client sending perSec requests each
// second for secs seconds (0 to secs−1), with one unparseable line first.
func simLog(perSec, secs int) string {
	var b strings.Builder
	b.WriteString("this is not a log line\n")
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for s := range secs {
		for range perSec {
			fmt.Fprintf(&b, `192.0.2.7 - - [%s] "GET /api/orders HTTP/1.1" 200 12 "-" "shop/1"`+"\n", at.Add(time.Duration(s)*time.Second).Format("02/Jan/2006:15:04:05 -0700"))
		}
	}
	return b.String()
}

// runLocal runs sluicectl in this process.
func runLocal(t *testing.T, args ...string) result {
	t.Helper()
	return runLocalStdin(t, "", args...)
}

func runLocalStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSimulateOffline: the command replays a log through a file's token
// bucket: burst at the first second, rate each second after; the
// unparseable line is reported with its number.
func TestSimulateOffline(t *testing.T) {
	t.Parallel()
	rules := writeTemp(t, "shop.yaml", shopRules) // token bucket 100/s, burst 150, per ip
	const perSec, secs = 300, 5
	log := writeTemp(t, "access.log", simLog(perSec, secs))
	r := runLocal(t, "simulate", rules, "--log", log, "-o", "json")
	if r.code != 0 {
		t.Fatalf("simulate: %+v", r)
	}
	var out simulateOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("simulate -o json: %v\n%s", err, r.stdout)
	}
	want := int64(150 + 100*(secs-1))
	rr := out.File.Rules[0]
	if out.Stats.Replayed != perSec*secs || out.Stats.Unparseable != 1 || out.Stats.Errors[0].Line != 1 || out.Published != nil {
		t.Fatalf("stats %+v", out.Stats)
	}
	if rr.ID != "orders-per-ip" || rr.Admitted != want || rr.Rejected != perSec*secs-want || rr.TopKeys[0].Key != "ip=192.0.2.7" {
		t.Fatalf("orders-per-ip: %+v, want %d admitted", rr, want)
	}
	// The same log from stdin, its format named.
	r = runLocalStdin(t, simLog(perSec, secs), "simulate", rules, "--log", "-", "--format", "combined", "-o", "json")
	var fromStdin simulateOutput
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &fromStdin) != nil || fromStdin.File.Rules[0].Admitted != want {
		t.Fatalf("simulate --log -: %+v", r)
	}
	r = runLocal(t, "simulate", rules, "--log", log)
	for _, s := range []string{"unparseable line 1: client address \"this\"", "orders-per-ip", fmt.Sprint(want), "ip=192.0.2.7 (" + fmt.Sprint(perSec*secs-want) + ")"} {
		if r.code != 0 || !strings.Contains(r.stdout, s) {
			t.Fatalf("simulate table: %+v, want %q in it", r, s)
		}
	}
}

func TestSimulateBadInput(t *testing.T) {
	t.Parallel()
	rules := writeTemp(t, "shop.yaml", shopRules)
	log := writeTemp(t, "access.log", simLog(1, 1))
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"no log", []string{"simulate", rules}, "--log PATH is required"},
		{"unknown format", []string{"simulate", rules, "--log", log, "--format", "apache"}, `--format: log format "apache": must be combined or json`},
		{"against the draft", []string{"simulate", rules, "--log", log, "--against", "draft"}, `--against "draft": must be published`},
		{"missing log", []string{"simulate", rules, "--log", log + ".gone"}, "reading the log: open"},
		{"invalid rules", []string{"simulate", writeTemp(t, "bad.yaml", strings.Replace(shopRules, "rate: 100", "rate: -1", 1)), "--log", log}, "limits[0].rate: must be > 0"},
		{"bad encoded-slashes", []string{"simulate", rules, "--log", log, "--encoded-slashes", "maybe"}, `encoded-slash policy "maybe" is not reject, decode or keep`},
		{"negative max-keys", []string{"simulate", rules, "--log", log, "--max-keys", "-1"}, `--max-keys "-1": must be 0 or more`},
		{"no token for published", []string{"simulate", rules, "--log", log, "--against", "published", "--token", "", "--token-file", "/nonexistent"}, "token file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := runLocal(t, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%v: %+v, want exit 1 and %q", tc.args, r, tc.want)
			}
		})
	}
}

// TestPrintSimulateSideBySide: with a published version, each limit's row
// has both sides' figures; a limit only one side has shows "-" on the other.
func TestPrintSimulateSideBySide(t *testing.T) {
	t.Parallel()
	out := simulateOutput{
		Log:   "access.log",
		Stats: replay.Stats{Format: replay.FormatJSON, Lines: 10, Replayed: 10},
		File: simulateSide{Source: "shop.yaml", Result: replay.Result{Requests: 10, Rules: []replay.RuleResult{
			{ID: "per-ip", Algorithm: "token_bucket", Scope: "node", Requests: 10, Admitted: 3, Rejected: 7, TopKeys: []replay.KeyCount{{Key: "ip=192.0.2.1", Rejected: 7}}},
			{ID: "new-limit", Algorithm: "fixed_window", Scope: "cluster", Requests: 3, Admitted: 3},
		}, Notes: []string{"cluster-scope limits are simulated as one node serving the whole log"}}},
		Published: &simulateSide{Source: "published", Version: 4, Result: replay.Result{Requests: 10, Rules: []replay.RuleResult{
			{ID: "per-ip", Algorithm: "token_bucket", Scope: "node", Requests: 10, Admitted: 10},
			{ID: "old-limit", Algorithm: "sliding_window", Scope: "node", Shadow: true, Requests: 10, Admitted: 8, ShadowRejected: 2, TopKeys: []replay.KeyCount{{Key: "ip=192.0.2.1", Rejected: 2, Error: 1}}},
		}}},
	}
	var b bytes.Buffer
	printSimulate(&b, &out)
	got := b.String()
	rows := map[string][]string{}
	for _, line := range strings.Split(got, "\n") {
		if f := strings.Fields(line); len(f) > 0 && rows[f[0]] == nil { // the table's row, not the top keys'
			rows[f[0]] = f
		}
	}
	for id, want := range map[string][]string{
		"LIMIT":     {"LIMIT", "ALGORITHM", "SCOPE", "SHOP.YAML", "REQUESTS", "ADMITTED", "REJECTED", "SHADOW", "V4", "REQUESTS", "ADMITTED", "REJECTED", "SHADOW"},
		"per-ip":    {"per-ip", "token_bucket", "node", "10", "3", "7", "0", "10", "10", "0", "0"},
		"new-limit": {"new-limit", "fixed_window", "cluster", "3", "3", "0", "0", "-", "-", "-", "-"},
		"old-limit": {"old-limit", "sliding_window", "(shadow)", "node", "-", "-", "-", "-", "10", "8", "0", "2"},
	} {
		if strings.Join(rows[id], " ") != strings.Join(want, " ") {
			t.Errorf("row %s: %q, want %q\n%s", id, rows[id], want, got)
		}
	}
	for _, s := range []string{
		"shop.yaml: 10 requests", "v4: 10 requests",
		"per-ip (shop.yaml): ip=192.0.2.1 (7)", "old-limit (v4): ip=192.0.2.1 (≤2)",
		"note: cluster-scope limits are simulated as one node",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("missing %q in\n%s", s, got)
		}
	}
}
