package api

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// reversedJSON rewrites a document, YAML or JSON, as JSON with every
// object's keys in reverse order and indented: the same rules, spelled
// differently.
func reversedJSON(tb testing.TB, doc []byte) []byte {
	tb.Helper()
	t, err := parseTree(doc)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	var write func(t *tree, indent string)
	write = func(t *tree, indent string) {
		switch t.kind {
		case kObject:
			buf.WriteString("{\n")
			for i := len(t.keys) - 1; i >= 0; i-- {
				k, _ := json.Marshal(t.keys[i])
				buf.WriteString(indent + "  " + string(k) + ": ")
				write(t.vals[i], indent+"  ")
				if i > 0 {
					buf.WriteString(",")
				}
				buf.WriteString("\n")
			}
			buf.WriteString(indent + "}")
		case kArray:
			buf.WriteString("[")
			for i, v := range t.vals {
				if i > 0 {
					buf.WriteString(", ")
				}
				write(v, indent)
			}
			buf.WriteString("]")
		default:
			writeJSON(&buf, t)
		}
	}
	write(t, "")
	return buf.Bytes()
}

// TestChecksumAcrossSyntaxes checks that the same rules have the same
// canonical form and checksum whether written as YAML or JSON, in any key
// order, with or without their defaults.
func TestChecksumAcrossSyntaxes(t *testing.T) {
	t.Parallel()
	demo, err := os.ReadFile("../deploy/rules/demo.yaml")
	if err != nil {
		demo = []byte(minimalYAML)
	}
	tests := []struct {
		desc string
		docs [][]byte
	}{
		{"full document", [][]byte{MustReadFile(t, "full.yaml"), reversedJSON(t, MustReadFile(t, "full.yaml"))}},
		{"DESIGN example", [][]byte{MustReadFile(t, "design.yaml"), reversedJSON(t, MustReadFile(t, "design.yaml"))}},
		{"demo rules", [][]byte{demo, reversedJSON(t, demo)}},
		{"minimal", [][]byte{[]byte(minimalYAML), []byte(minimalJSON), reversedJSON(t, []byte(minimalYAML)),
			[]byte("routes:\n- upstream:\n    targets:\n    - url: http://127.0.0.1:1\n      weight: 1\n    timeout: 30000ms\n  id: a\n  match: {}\nnamespace: shop\nlimits: []\n")}},
		{"defaults omitted and written out", [][]byte{
			MustReadFile(t, "defaults-omitted.yaml"),
			reversedJSON(t, MustReadFile(t, "defaults-omitted.yaml")),
			MustReadFile(t, "defaults-explicit.json"),
		}},
		{"YAML spellings", [][]byte{
			[]byte("namespace: x\nlimits: [{id: a, algorithm: token_bucket, rate: 0x10, period: 1m, burst: 1_6}]\nbreakers: [{id: b, window: 1s, errorRatio: .5, openFor: 1s}]\n"),
			[]byte(`{"namespace":"x","limits":[{"id":"a","algorithm":"token_bucket","rate":16,"period":"60s","burst":16.0}],"breakers":[{"id":"b","window":"1000ms","errorRatio":5e-1,"openFor":"1s"}]}`),
			[]byte("\"namespace\": \"x\"\n\"limits\":\n- {\"id\": \"a\", \"algorithm\": 'token_bucket', \"rate\": !!int \"16\", \"period\": \"1m0s\"}\nbreakers: [{id: b, window: 1s, errorRatio: 0.50, openFor: 1s, maxOpenFor: 8s}]\n"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var first *RuleSet
			for i, doc := range tt.docs {
				rs := MustDecode(t, doc)
				if i == 0 {
					first = rs
					continue
				}
				if a, b := string(first.Canonical()), string(rs.Canonical()); a != b {
					t.Fatalf("document %d: canonical forms differ:\n%s\n%s", i, a, b)
				}
				if first.Checksum() != rs.Checksum() {
					t.Fatalf("document %d: checksums differ", i)
				}
			}
		})
	}
}

// TestChecksumSeesChanges checks that every meaningful change, however small,
// changes the checksum.
func TestChecksumSeesChanges(t *testing.T) {
	t.Parallel()
	base := MustValid(t, "full.yaml").Checksum()
	for _, mutate := range []func(rs *RuleSet){
		func(rs *RuleSet) { rs.Limits[0].Rate++ },
		func(rs *RuleSet) { rs.Limits[0].Shadow = false },
		func(rs *RuleSet) { rs.Limits[0].Key[0], rs.Limits[0].Key[1] = rs.Limits[0].Key[1], rs.Limits[0].Key[0] },
		func(rs *RuleSet) { rs.Routes[0].Match.Headers["X-Canary"] = "false" },
		func(rs *RuleSet) { rs.Breakers[0].ErrorRatio = 0.5000001 },
		func(rs *RuleSet) { rs.Degrades[0].Fallback.JSON = RawJSON(`{"code":5031}`) },
		func(rs *RuleSet) { rs.Namespace = "shop2" },
		func(rs *RuleSet) { rs.Routes[0], rs.Routes[1] = rs.Routes[1], rs.Routes[0] },
	} {
		rs := MustValid(t, "full.yaml")
		mutate(rs)
		if rs.Checksum() == base {
			t.Errorf("change not seen by the checksum: %s", rs.Canonical())
		}
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"full.yaml", "design.yaml", "defaults-omitted.yaml"} {
		rs := MustDecode(t, MustReadFile(t, name))
		c := rs.Canonical()
		again := MustDecode(t, c)
		if got := again.Canonical(); !bytes.Equal(got, c) {
			t.Fatalf("%s: canonical form does not re-decode to itself:\n%s\n%s", name, c, got)
		}
		if n := rs.Normalize(); !bytes.Equal(n.Canonical(), c) {
			t.Fatalf("%s: Normalize is not idempotent", name)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, c); err != nil || !bytes.Equal(compact.Bytes(), c) {
			t.Fatalf("%s: canonical form is not compact JSON (%v): %s", name, err, c)
		}
		if sum := rs.Checksum(); !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(sum) || sum != ChecksumOf(c) {
			t.Fatalf("%s: checksum %q", name, sum)
		}
	}
}

// TestCanonicalGolden pins the canonical form of full.yaml. Checksums are
// stored in Postgres and etcd: a change here makes every published version
// fail its checksum, so it must be deliberate (and come with a migration).
func TestCanonicalGolden(t *testing.T) {
	t.Parallel()
	got := MustValid(t, "full.yaml").Canonical()
	want := bytes.TrimSpace(MustReadFile(t, "full.canonical.json"))
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical form of full.yaml changed:\n got %s\nwant %s", got, want)
	}
}

func TestNormalizeDefaults(t *testing.T) {
	t.Parallel()
	n := MustDecode(t, MustReadFile(t, "defaults-omitted.yaml")).Normalize()
	r, l, b, d := n.Routes[0], n.Limits, n.Breakers[0], n.Degrades[0]
	checks := []struct {
		desc string
		ok   bool
	}{
		{"timeout", r.Upstream.Timeout.D() == DefaultUpstreamTimeout},
		{"weight", r.Upstream.Targets[0].Weight == 1},
		{"header names", r.Match.Headers["X-Canary"] == "true" && len(r.Match.Headers) == 1},
		{"key header name", l[0].Key[1] == "header:X-Tenant"},
		{"cost header name", l[0].Cost.Header == "X-Cost"},
		{"period", l[0].Period.D() == DefaultPeriod && l[2].Period == 0},
		{"burst", l[0].Burst == 10 && l[1].Burst == 0 && l[2].Burst == 0},
		{"key", l[1].Key[0] == "global" && len(l[1].Key) == 1},
		{"scope", l[0].Scope == ScopeNode && l[1].Scope == ScopeCluster},
		{"cluster mode", l[1].Mode == ModeExact && l[1].OnStoreError == OnStoreErrorLocal && l[0].Mode == "" && l[0].OnStoreError == ""},
		{"reject status", l[0].Response.Status == DefaultLimitRejectStatus},
		{"minRequests", b.MinRequests == DefaultBreakerMinRequests},
		{"maxOpenFor", b.MaxOpenFor == b.OpenFor*DefaultMaxOpenForFactor},
		{"halfOpenProbes", b.HalfOpenProbes == DefaultHalfOpenProbes},
		{"breaker fallback", b.Fallback.Status == DefaultFallbackStatus},
		{"degrade window", d.Window.D() == DefaultDegradeWindow},
		{"shed ratio", d.Level1ShedRatio == DefaultLevel1ShedRatio},
		{"recoverAfter", d.RecoverAfter == DefaultRecoverAfter},
		{"degrade key", len(d.Key) == 1 && d.Key[0] == "ip"},
		{"degrade fallback", d.Fallback.Status == DefaultFallbackStatus && string(d.Fallback.JSON) == `{"code":5031,"message":"busy"}`},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("default not applied: %s", c.desc)
		}
	}
	if err := n.Validate(); err != nil {
		t.Fatalf("normalized rules do not validate: %v", err)
	}
}

// TestCloneIsDeep checks that Clone shares nothing with its source, also for
// an invalid rule set (negative durations, NaN, bad raw JSON).
func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	rs := MustValid(t, "full.yaml")
	rs.Limits[0].Period = -1
	rs.Degrades[0].Fallback.JSON = RawJSON("{not json")
	c := rs.Clone()
	c.Routes[0].Match.Headers["X-Canary"] = "changed"
	c.Routes[0].Match.Hosts[0] = "changed"
	c.Limits[0].Cost.Header = "changed"
	c.Degrades[0].Triggers.Level1.QPSAbove = 1
	c.Degrades[0].Fallback.JSON[0] = '['
	if rs.Routes[0].Match.Headers["X-Canary"] != "true" || rs.Routes[0].Match.Hosts[0] != "shop.example.com" ||
		rs.Limits[0].Cost.Header != "X-Cost" || rs.Degrades[0].Triggers.Level1.QPSAbove != 3000 ||
		string(rs.Degrades[0].Fallback.JSON) != "{not json" || c.Limits[0].Period != -1 {
		t.Fatal("Clone shares memory with its source")
	}
	// Canonical of an invalid rule set is stable and does not panic.
	if a, b := rs.Canonical(), rs.Canonical(); !bytes.Equal(a, b) || !json.Valid(a) {
		t.Fatalf("canonical of an invalid rule set: %s", a)
	}
}
