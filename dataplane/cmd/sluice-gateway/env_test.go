package main

import (
	"io"
	"strings"
	"testing"
)

// TestEnvironment: a malformed SLUICE_ value is an error naming the
// variable and the value (the same words as sluice-admin's).
func TestEnvironment(t *testing.T) {
	for _, tc := range []struct {
		desc, name, value string
		want              string // error substring; "" means accepted
	}{
		{"int", "SLUICE_MAX_KEYS", "100", ""},
		{"malformed int", "SLUICE_MAX_KEYS", "abc", `invalid value "abc" for environment SLUICE_MAX_KEYS`},
		{"malformed duration", "SLUICE_SHUTDOWN_TIMEOUT", "30", `invalid value "30" for environment SLUICE_SHUTDOWN_TIMEOUT`},
		{"malformed bool", "SLUICE_PPROF", "maybe", `invalid value "maybe" for environment SLUICE_PPROF`},
		{"malformed text", "SLUICE_ENCODED_SLASHES", "sometimes", `invalid value "sometimes" for environment SLUICE_ENCODED_SLASHES`},
		{"removed engine setting", "SLUICE_HTTP1_ENGINE", "fasthttp", `SLUICE_HTTP1_ENGINE="fasthttp": removed`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			_, err := parseFlags([]string{"--rules", "rules.yaml", "--node-id", "n1"}, io.Discard)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("parseFlags: %v, want %q", err, tc.want)
			}
		})
	}
}
