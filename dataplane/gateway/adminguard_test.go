package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAdminRefusesRebinding: through the node's real admin socket, a DNS
// rebinding POST /degrade (Host and Origin attacker.example, text/plain
// body) from loopback is refused and changes nothing, a cross-site form post
// is refused, and the curl way (loopback Host, JSON) still works.
func TestAdminRefusesRebinding(t *testing.T) {
	up := okUpstream(t)
	_, _, admin := MustStart(t, degradeRules(up.URL))
	body := `{"rule":"shop-degrade","level":2,"ttl":"1m"}`
	do := func(host, origin, ctype string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", admin+"/degrade", strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	level := func() string {
		t.Helper()
		resp, err := http.Get(admin + "/degrades")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	tests := []struct {
		desc, host, origin, ctype string
		want                      int
	}{
		{"DNS rebinding", "attacker.example:9901", "http://attacker.example:9901", "text/plain", http.StatusMisdirectedRequest},
		{"cross-site form post to loopback", "", "http://attacker.example", "text/plain", http.StatusForbidden},
		{"cross-site JSON fetch", "", "http://attacker.example", "application/json", http.StatusForbidden},
		{"text/plain without origin", "", "", "text/plain", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if code, b := do(tt.host, tt.origin, tt.ctype); code != tt.want {
				t.Errorf("status %d %s, want %d", code, b, tt.want)
			}
			if l := level(); strings.Contains(l, `"override"`) {
				t.Errorf("refused request changed the level: %s", l)
			}
		})
	}
	if code, b := do("", "", "application/json"); code != http.StatusOK {
		t.Fatalf("curl --json from loopback: %d %s", code, b)
	}
	if l := level(); !strings.Contains(l, `"override"`) {
		t.Fatalf("the loopback override did not apply: %s", l)
	}
}
