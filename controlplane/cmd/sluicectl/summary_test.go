package main

import (
	"encoding/json"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/api"
)

// TestSummarize holds the console's cases (web/src/features/changes/
// summary.test.ts): the CLI and the console word a diff the same way.
func TestSummarize(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		desc string
		diff api.Diff
		next *api.RuleSet
		want []string
	}{
		{
			desc: "a changed rate reads old → new with the period",
			diff: api.Diff{Rules: []api.RuleDiff{{Kind: "limits", ID: "orders-per-ip", Op: api.DiffChanged, Fields: []api.FieldDiff{{Path: "rate", Old: raw("5"), New: raw("50")}}}}},
			next: &api.RuleSet{Namespace: "demo", Limits: []api.Limit{{ID: "orders-per-ip", Algorithm: "token_bucket", Rate: 50, Period: api.Duration(1e9)}}},
			want: []string{"limit orders-per-ip: rate 5 → 50 per 1s"},
		},
		{
			desc: "an added limit is described",
			diff: api.Diff{Rules: []api.RuleDiff{{Kind: "limits", ID: "new", Op: api.DiffAdded, New: raw(`{"algorithm":"fixed_window","rate":10,"period":"1m","key":["ip"],"scope":"cluster"}`)}}},
			want: []string{"limit new added: fixed_window 10 per 1m, key [ip], cluster-wide"},
		},
		{
			desc: "a removed route and a reorder",
			diff: api.Diff{Rules: []api.RuleDiff{{Kind: "routes", ID: "old", Op: api.DiffRemoved, Old: raw("{}")}}, Reordered: []string{"routes"}},
			want: []string{"route old removed", "routes reordered (for routes, the first match wins)"},
		},
		{
			desc: "several fields of a manual degrade",
			diff: api.Diff{Rules: []api.RuleDiff{{Kind: "degrades", ID: "d", Op: api.DiffChanged, Fields: []api.FieldDiff{{Path: "mode", Old: raw(`"auto"`), New: raw(`"manual"`)}, {Path: "level", New: raw("2")}}}}},
			want: []string{"degrade d: mode auto → manual; level (none) → 2"},
		},
		{
			desc: "an added route, breaker and manual degrade",
			diff: api.Diff{Rules: []api.RuleDiff{
				{Kind: "routes", ID: "r", Op: api.DiffAdded, New: raw(`{"match":{"path":"/x"}}`)},
				{Kind: "breakers", ID: "b", Op: api.DiffAdded, New: raw(`{"window":"10s","openFor":"30s"}`)},
				{Kind: "degrades", ID: "d", Op: api.DiffAdded, New: raw(`{"mode":"manual","level":1}`)},
			}},
			want: []string{"route r added: path /x", "breaker b added: window 10s, open for 30s", "degrade d added: manual mode, level 1"},
		},
		{
			desc: "kind: service rules name their resources, sdk: key parts and bucket",
			diff: api.Diff{Kind: &api.FieldDiff{Path: "kind", Old: raw(`"gateway"`), New: raw(`"service"`)}, Rules: []api.RuleDiff{
				{Kind: "limits", ID: "per-user", Op: api.DiffAdded, New: raw(`{"resources":["orders.Create"],"key":["sdk:user"],"algorithm":"token_bucket","rate":300,"period":"1s","scope":"cluster","bucket":"orders-per-user"}`)},
				{Kind: "breakers", ID: "db", Op: api.DiffAdded, New: raw(`{"resources":["db.InsertOrder"],"window":"10s","openFor":"5s"}`)},
				{Kind: "degrades", ID: "queue", Op: api.DiffAdded, New: raw(`{"resources":["queue.PublishOrder","queue.Ack"],"mode":"manual"}`)},
			}},
			want: []string{"kind gateway → service",
				"limit per-user added: token_bucket 300 per 1s, key [sdk:user], cluster-wide in bucket orders-per-user, on resources [orders.Create]",
				"breaker db added: window 10s, open for 5s, on resources [db.InsertOrder]",
				"degrade queue added: manual mode, level 0, on resources [queue.PublishOrder, queue.Ack]"},
		},
		{desc: "no diff", diff: api.Diff{Rules: []api.RuleDiff{}}, want: []string{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			lines, _ := summarize(&tc.diff, nil, tc.next)
			got := []string{}
			for _, l := range lines {
				got = append(got, l.Text)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSummarizeServiceExample: the example service's rules
// (dataplane/sdk/example/orders/rules.yaml) read, validated and diffed
// against nothing as validate and diff do: every rule is described with
// what it guards.
func TestSummarizeServiceExample(t *testing.T) {
	rf, err := readRuleFile("../../../dataplane/sdk/example/orders/rules.yaml")
	if err != nil || len(rf.errs) != 0 {
		t.Fatalf("reading the example: %v %v", err, rf.errs)
	}
	if got := serviceCounts(rf.rs); got != "kind service, 3 resources, " {
		t.Fatalf("serviceCounts %q", got)
	}
	lines, general := summarize(api.DiffRuleSets(nil, rf.rs), api.Warnings(nil, rf.rs), rf.rs)
	got := []string{}
	for _, l := range lines {
		got = append(got, l.Text)
	}
	want := []string{
		"route create-order added: path /api/orders",
		"limit db-connections added: concurrency 8 in flight, key [global], on resources [db.InsertOrder]",
		"limit health-checks added: token_bucket 100 per 1s, key [global], on resources [/grpc.health.v1.Health/Check]",
		"limit orders-per-ip added: token_bucket 20 per 1s, key [ip]",
		"limit publishes-per-user added: token_bucket 5 per 1s, key [sdk:user], on resources [queue.PublishOrder]",
		"breaker db added: window 10s, open for 5s, on resources [db.InsertOrder]",
		"degrade queue added: manual mode, level 0, on resources [queue.PublishOrder]",
	}
	if !slices.Equal(got, want) || len(general) != 0 {
		t.Fatalf("got %q (general %v), want %q", got, general, want)
	}
	if serviceCounts(&api.RuleSet{Namespace: "shop"}) != "" {
		t.Fatal("a gateway's rules have service counts")
	}
}

func TestSummarizeWarnings(t *testing.T) {
	d := api.Diff{Rules: []api.RuleDiff{{Kind: "limits", ID: "a", Op: api.DiffChanged, Fields: []api.FieldDiff{{Path: "rate", Old: json.RawMessage("5"), New: json.RawMessage("500")}}}}}
	lines, general := summarize(&d, []api.Warning{
		{Code: "limit-loosened", Path: "limits[a].rate", Message: "rate raised 100×"},
		{Code: "cluster-limit-without-redis", Message: "no live node has Redis"},
	}, nil)
	if len(lines) != 1 || len(lines[0].Warnings) != 1 || lines[0].Warnings[0].Code != "limit-loosened" {
		t.Fatalf("rule warnings: %+v", lines)
	}
	if len(general) != 1 || general[0].Code != "cluster-limit-without-redis" {
		t.Fatalf("general warnings: %+v", general)
	}
}

// TestEveryCommandHasHelp: --help works on every command and shows an example.
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(path []string, list []*command)
	walk = func(path []string, list []*command) {
		for _, c := range list {
			p := append(slices.Clone(path), c.name)
			if c.sub != nil {
				walk(p, c.sub)
				continue
			}
			t.Run(strings.Join(p, " "), func(t *testing.T) {
				var out strings.Builder
				if code := run(append(p, "--help"), strings.NewReader(""), &out, io.Discard); code != 0 {
					t.Fatalf("exit %d", code)
				}
				if !strings.Contains(out.String(), "Example:\n  sluicectl "+p[0]) && p[0] != "completion" {
					t.Fatalf("no example in:\n%s", out.String())
				}
				if c.example == "" || c.summary == "" {
					t.Fatal("command without a summary or an example")
				}
			})
		}
	}
	walk(nil, commands())
}

// TestCompletion: both scripts name every command and a leaf's flags.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh"} {
		t.Run(shell, func(t *testing.T) {
			var out strings.Builder
			if code := run([]string{"completion", shell}, strings.NewReader(""), &out, io.Discard); code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, w := range []string{`"changes") echo "list show approve reject publish unschedule"`, `"node degrade") echo "--help --admin --admin-token -o --ttl"`, `"apply") echo`, "--against"} {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("%s completion lacks %q", shell, w)
				}
			}
		})
	}
	var errb strings.Builder
	if code := run([]string{"completion", "fish"}, strings.NewReader(""), io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "bash or zsh") {
		t.Fatalf("completion fish: %d %q", code, errb.String())
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		desc string
		args []string
		pos  []string
		t    string
	}{
		{"flags after the file", []string{"f.yaml", "--title", "x"}, []string{"f.yaml"}, "x"},
		{"flags before", []string{"--title=x", "a", "b"}, []string{"a", "b"}, "x"},
		{"double dash", []string{"--title", "x", "--", "--weird"}, []string{"--weird"}, "x"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			title := fs.String("title", "", "")
			pos, err := parseInterspersed(fs, tc.args)
			if err != nil || !slices.Equal(pos, tc.pos) || *title != tc.t {
				t.Fatalf("got %q %q %v", pos, *title, err)
			}
		})
	}
}
