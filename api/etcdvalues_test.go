package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSelectorAndLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		sel    Selector
		labels string
		want   bool
	}{
		{"exact", Selector{"zone": "a"}, "zone=a", true},
		{"subset", Selector{"zone": "a"}, "zone=a, tier=edge", true},
		{"other value", Selector{"zone": "a"}, "zone=b", false},
		{"missing label", Selector{"zone": "a", "tier": "edge"}, "zone=a", false},
		{"empty selector matches nobody", Selector{}, "zone=a", false},
		{"a name with a slash", Selector{"sluice.dev/pool": "edge-1"}, "sluice.dev/pool=edge-1", true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			labels, err := ParseLabels(tc.labels)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.sel.Matches(labels); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParseLabelsRefusesWhatNoSelectorHolds: a node's label must be one a
// canary selector can name. ParseLabels used to accept an empty value, a
// space or a colon, which ValidateSelector refuses: such a node could never
// be put in a canary, and nothing said so.
func TestParseLabelsRefusesWhatNoSelectorHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, labels, want string
	}{
		{"no equals sign", "zone", "is not key=value"},
		{"no name", "=a", "is not key=value"},
		{"a name twice", "a=1,a=2", "given twice"},
		{"empty value", "zone=", "label value"},
		{"space in a value", "zone=eu west", "label value"},
		{"colon in a name", "zone:x=a", "label name"},
		{"name starting with a dot", ".zone=a", "label name"},
		{"value too long", "zone=" + strings.Repeat("a", 64), "label value"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			labels, err := ParseLabels(tc.labels)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseLabels(%q) = %v, %v; want an error saying %q", tc.labels, labels, err, tc.want)
			}
			// What ParseLabels refuses, ValidateSelector refuses too.
			k, v, _ := strings.Cut(tc.labels, "=")
			if tc.desc != "a name twice" && len(ValidateSelector(map[string]string{k: v})) == 0 {
				t.Errorf("ValidateSelector accepts %q=%q", k, v)
			}
		})
	}
}

func TestValidateSelector(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range 17 {
		many[string(rune('a'+i))] = "x"
	}
	for _, tc := range []struct {
		desc string
		sel  map[string]string
		want []string // paths
	}{
		{"ok", map[string]string{"zone": "a", "tier": "edge"}, nil},
		{"empty", nil, []string{"canary.selector"}},
		{"too many", many, []string{"canary.selector"}},
		{"bad name and value", map[string]string{"-x": "a b"}, []string{"canary.selector.-x", "canary.selector.-x"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			errs := ValidateSelector(tc.sel)
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.Path)
			}
			if strings.Join(paths, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ValidateSelector(%v) = %v, want paths %v", tc.sel, errs, tc.want)
			}
		})
	}
}

func TestNodeID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"gw-1", true},
		{"gw_1.eu-west", true},
		{strings.Repeat("n", 128), true},
		{"", false},
		{strings.Repeat("n", 129), false},
		{"gw/1", false},
		{"gw 1", false},
		{"gw:1", false},
		{"gw\u00e9", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			err := ValidateNodeID(tc.id)
			if (err == nil) != tc.ok || ValidNodeID(tc.id) != tc.ok {
				t.Fatalf("ValidateNodeID(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), NodeIDRule) {
				t.Errorf("error %q does not say the rule", err)
			}
		})
	}
}

// TestCanaryRoundTrip: what the control plane encodes, the node decodes;
// a canary whose selector the control plane would refuse is refused.
func TestCanaryRoundTrip(t *testing.T) {
	t.Parallel()
	rs := &RuleSet{Namespace: "shop"}
	doc, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	pub := PublishedValue{Version: 3, Checksum: rs.Checksum(), PublishedAt: time.Now().UTC(), PublishedBy: "ann", Rules: doc}
	for _, tc := range []struct {
		desc string
		sel  Selector
		want string // "" means accepted
	}{
		{"valid", Selector{"zone": "a"}, ""},
		{"empty selector", Selector{}, "canary.selector: must hold at least one label"},
		{"bad value", Selector{"zone": "a b"}, "canary.selector.zone: label value"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			b, err := EncodeCanary(tc.sel, pub)
			if err != nil {
				t.Fatal(err)
			}
			c, p, err := DecodeCanary(b)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("DecodeCanary: %v, want an error saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != 3 || p.Version != 3 || p.Checksum != pub.Checksum || !c.Selector.Matches(map[string]string{"zone": "a"}) {
				t.Fatalf("decoded %+v %+v", c, p)
			}
		})
	}
}

func TestDecodeOverride(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, value, want string
	}{
		{"drain", `{"drain":true,"by":"ann"}`, ""},
		{"levels", `{"degradeLevels":{"search":2}}`, ""},
		{"level out of range", `{"degradeLevels":{"search":3}}`, "degradeLevels.search: must be 0, 1 or 2"},
		{"unknown field", `{"drain":true,"mode":"x"}`, "unknown field"},
		{"not JSON", `drain`, "not valid JSON"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := DecodeOverride([]byte(tc.value))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("DecodeOverride(%s) = %v, want %q", tc.value, err, tc.want)
			}
		})
	}
}
