package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quotaRules is a rule set with a daily quota (UTC) of rate per X-User in
// Redis.
func (h *harness) quotaRules(rate int) string {
	return fmt.Sprintf(`{"namespace": %q,
  "routes": [{"id": "echo", "match": {"pathPrefix": "/"}, "upstream": {"targets": [{"url": %q}], "timeout": "5s"}}],
  "limits": [{"id": "daily", "key": ["header:X-User"], "algorithm": "quota", "rate": %d, "calendar": "day", "timezone": "UTC", "scope": "cluster", "onStoreError": "deny"}]}`,
		ns, h.upstream.URL, rate)
}

// TestQuotaUsageInDraftCheck: a real gateway (etcd, Redis) serves a daily
// quota of 10; one caller uses 7, another 2. Its reports carry what the
// Redis replies said, the control plane checks and keeps them, and a draft
// lowering the quota to 5 is warned that today's heaviest caller has
// already used 7 (one lowered to 8 is not warned).
func TestQuotaUsageInDraftCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace()
	v := h.mustPublish(h.quotaRules(10), "a daily quota")
	id := "q1"
	g := &gateway{id: id, listen: freeAddr(t), admin: freeAddr(t), stateDir: filepath.Join(h.dir, "state-"+id)}
	g.p = &proc{name: "sluice-gateway " + id, bin: filepath.Join(h.bins, "sluice-gateway"), log: filepath.Join(h.dir, "gateway-"+id+".log"),
		args: []string{"--etcd", h.etcd.Addr(), "--namespace", ns, "--node-id", id, "--labels", "node=" + id,
			"--state-dir", g.stateDir, "--listen", g.listen, "--admin", g.admin, "--trust-keys", h.trustFile,
			"--shutdown-timeout", "5s", "--log-level", "info", "--report-interval", "300ms",
			"--redis", "redis://127.0.0.1:6379", "--redis-prefix", fmt.Sprintf("sluice-e2e-quota-%d:", time.Now().UnixNano()), "--redis-timeout", "500ms"}}
	h.gateways[id] = g
	h.procs = append(h.procs, g.p)
	h.startGateway(id)
	h.waitVersion(v, 30*time.Second, g)
	for user, n := range map[string]int{"alice": 7, "bob": 2} {
		for i := range n {
			if code, err := g.get(user); err != nil || code != http.StatusOK {
				t.Fatalf("%s's request %d: %d %v", user, i, code, err)
			}
		}
	}

	check := func(rate int) (string, error) {
		var c struct {
			Warnings []struct{ Code, Message string }
		}
		r, err := h.author.expect(http.StatusOK, "POST", "/api/v1/namespaces/"+ns+"/draft/check", h.quotaRules(rate))
		if err != nil {
			return "", err
		}
		if err := r.decode(&c); err != nil {
			return "", err
		}
		for _, w := range c.Warnings {
			if w.Code == "quota-lowered" {
				return w.Message, nil
			}
		}
		return "", nil
	}
	want := "quota daily lowered to 5; today's heaviest caller has already used 7: callers above 5 are refused until " +
		time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour).Format("2006-01-02 15:04 MST") + " (1 caller had used over half of the old quota of 10)"
	waitFor(t, 20*time.Second, "the usage in the draft check", func() error {
		m, err := check(5)
		if err != nil {
			return err
		}
		if m != want {
			return fmt.Errorf("warning %q, want %q", m, want)
		}
		return nil
	})
	if m, err := check(8); err != nil || m != "" {
		t.Fatalf("lowered to 8, above the heaviest caller: %q %v", m, err)
	}
	if m, err := check(11); err != nil || strings.Contains(m, "lowered") {
		t.Fatalf("raised: %q %v", m, err)
	}
}
