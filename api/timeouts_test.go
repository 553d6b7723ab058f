package api

import (
	"bytes"
	"strings"
	"testing"
)

// TestClientTimeoutsCanonical: bodyTimeout and writeTimeout at their defaults
// are left out of the canonical form (documents written before them keep
// their checksums); other values are kept.
func TestClientTimeoutsCanonical(t *testing.T) {
	t.Parallel()
	doc := func(extra string) *RuleSet {
		rs, err := Decode([]byte("namespace: t\nroutes:\n  - id: r\n    upstream: {targets: [{url: \"http://127.0.0.1:1\"}]" + extra + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Validate(); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	plain := doc("")
	if got := doc(", bodyTimeout: 10s, writeTimeout: 10s").Checksum(); got != plain.Checksum() {
		t.Errorf("explicit defaults change the checksum")
	}
	if bytes.Contains(plain.Canonical(), []byte("Timeout")) {
		t.Errorf("defaults written out: %s", plain.Canonical())
	}
	c := doc(", bodyTimeout: 2s, writeTimeout: 1m").Canonical()
	if !bytes.Contains(c, []byte(`"bodyTimeout":"2s","writeTimeout":"1m0s"`)) {
		t.Errorf("canonical form lost the timeouts: %s", c)
	}
	if err := doc("").Validate(); err != nil {
		t.Fatal(err)
	}
	bad, _ := Decode([]byte("namespace: t\nroutes:\n  - id: r\n    upstream: {targets: [{url: \"http://127.0.0.1:1\"}], bodyTimeout: 2h, writeTimeout: -1s}\n"))
	if bad != nil {
		err := bad.Validate()
		for _, p := range []string{"routes[0].upstream.bodyTimeout", "routes[0].upstream.writeTimeout"} {
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("Validate = %v, want an error at %s", err, p)
			}
		}
	}
}
