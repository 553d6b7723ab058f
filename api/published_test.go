package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// publish builds a published value around rules, with its correct checksum
// unless sum is given.
func publish(tb testing.TB, version int64, rules []byte, sum string) []byte {
	tb.Helper()
	if sum == "" {
		sum = MustDecode(tb, rules).Checksum()
	}
	b, err := json.Marshal(map[string]any{
		"version": version, "checksum": sum, "publishedAt": "2025-01-02T03:04:05Z",
		"publishedBy": "alice", "rules": json.RawMessage(rules),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodePublished(t *testing.T) {
	t.Parallel()
	full := MustValid(t, "full.yaml")
	canonical := full.Canonical()
	p, err := DecodePublished(publish(t, 7, canonical, ""))
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 7 || p.Checksum != full.Checksum() || p.PublishedBy != "alice" ||
		!p.PublishedAt.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) || p.Rules.Namespace != "shop" {
		t.Fatalf("got %+v", p)
	}
	// A published value written by Go's encoder round-trips.
	again, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePublished(again); err != nil {
		t.Fatalf("re-encoded value: %v", err)
	}
	// The rules need not be in canonical form: the checksum is of their meaning.
	if _, err := DecodePublished(publish(t, 7, reversedJSON(t, MustReadFile(t, "full.yaml")), full.Checksum())); err != nil {
		t.Fatalf("non-canonical rules: %v", err)
	}
}

func TestDecodePublishedErrors(t *testing.T) {
	t.Parallel()
	valid := []byte(minimalJSON)
	invalid := []byte(`{"namespace":"shop","limits":[{"id":"a","algorithm":"token_bucket","rate":0}]}`)
	tests := []struct {
		desc string
		data []byte
		msg  string
	}{
		{"not JSON", []byte("version: 1\n"), "not valid JSON"},
		{"empty", nil, "not valid JSON"},
		{"truncated", publish(t, 1, valid, "")[:20], "not valid JSON"},
		{"missing version", []byte(`{"checksum":"sha256:00","rules":` + minimalJSON + `}`), "no version"},
		{"zero version", publish(t, 0, valid, ""), "no version"},
		{"negative version", publish(t, -3, valid, ""), "no version"},
		{"version of the wrong type", []byte(`{"version":"1","rules":` + minimalJSON + `}`), "not valid JSON"},
		{"missing rules", []byte(`{"version":1,"checksum":"sha256:00"}`), "has no rules"},
		{"null rules", []byte(`{"version":1,"checksum":"sha256:00","rules":null}`), "has no rules"},
		{"rules with an unknown field", publish(t, 2, []byte(`{"namespace":"shop","bogus":1}`), "sha256:00"), "unknown field"},
		{"rules not an object", publish(t, 2, []byte(`"namespace: shop"`), "sha256:00"), "expected an object"},
		{"rules failing validation", publish(t, 3, invalid, ""), "limits[0].rate: must be > 0"},
		{"wrong checksum", publish(t, 4, valid, "sha256:"+strings.Repeat("0", 64)), "does not match"},
		{"missing checksum", []byte(`{"version":5,"rules":` + minimalJSON + `}`), "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, err := DecodePublished(tt.data)
			if err == nil || p != nil {
				t.Fatalf("DecodePublished = %+v, %v; want an error", p, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// TestDecodePublishedFieldErrors checks that the rules' field errors stay
// reachable through AsErrors, for the node's status report.
func TestDecodePublishedFieldErrors(t *testing.T) {
	t.Parallel()
	_, err := DecodePublished(publish(t, 3, []byte(`{"namespace":"shop","limits":[{"id":"a","algorithm":"token_bucket","rate":0}]}`), ""))
	wantErrors(t, err, "must be > 0", "limits[0].rate")
}
