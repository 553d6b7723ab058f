package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncodedSlashesFlag: --encoded-slashes takes reject (the default),
// decode or keep, and refuses anything else at start naming the choices;
// with the default, the real binary answers /api%2Forders with 400.
func TestEncodedSlashesFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("namespace: x\nroutes:\n  - {id: a, upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runBinary(path, "--encoded-slashes", "Decode")
	if err == nil || !strings.Contains(out, `"Decode" is not reject, decode or keep`) {
		t.Fatalf("--encoded-slashes Decode: err %v, output:\n%s", err, out)
	}
	up := upstream(t)
	g := startGateway(t, fmt.Sprintf("namespace: x\nroutes:\n  - {id: a, upstream: {targets: [{url: %q}]}}\n", up.URL))
	resp, err := http.Get("http://" + g.addr + "/api%2Forders")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "encoded slash") {
		t.Fatalf("default policy: %d %s, want 400 naming the encoded slash", resp.StatusCode, body)
	}
}
