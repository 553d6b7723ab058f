package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	toolsMu sync.Mutex
	tools   = map[string]string{}
)

// mustTool builds the command pkg as name next to the harness's binaries,
// once per test binary; one already in SLUICE_E2E_BIN is used as it is.
func mustTool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	dir := mustBinaries(tb)
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if bin, ok := tools[name]; ok {
		return bin
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil || os.Getenv("SLUICE_E2E_BIN") == "" {
		root, err := repoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	tools[name] = bin
	return bin
}

// tourLines are the command lines of README.md's tour: the sh code blocks
// of its "## ... tour ..." section, each line unindented, comment lines
// and blank ones left out.
func tourLines(tb testing.TB) []string {
	tb.Helper()
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		tb.Fatal(err)
	}
	doc := string(b)
	start := regexp.MustCompile(`(?m)^## .*\btour\b.*$`).FindStringIndex(doc)
	if start == nil {
		tb.Fatal("README.md has no \"## ... tour\" section")
	}
	section := doc[start[1]:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var lines []string
	in := false
	for _, l := range strings.Split(section, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case !in && t == "```sh":
			in = true
		case in && t == "```":
			in = false
		case in && t != "" && !strings.HasPrefix(t, "#"):
			lines = append(lines, t)
		}
	}
	if len(lines) == 0 {
		tb.Fatal("README.md's tour has no sh code blocks")
	}
	return lines
}

// TestReadmeTour runs the command lines of README.md's 5-minute tour as a
// reader of the README would after make run, against the same stack started
// the same way, on ports the system picks: sluice-admin signing what it
// publishes, the demo rules (deploy/rules/demo.yaml) published to namespace
// demo through review, the demo upstream with its identity provider, a
// gateway gw-1 following etcd with Redis, .run/credentials and
// .run/demo-tokens as make run writes them, and bin/sluicectl. Each line
// runs in bash (the README's addresses mapped to the test's, /tmp to a
// temporary directory) and must exit 0 (a diff of an edited file: 2); a
// line whose comment names a status (a 429, no token: 401) must show it.
// Between lines the test does what the tour asks the reader to do: edit
// the exported file (orders-per-ip's rate 5 → 50), and, as the reviewer,
// approve and publish the change apply opened (its comment line). Steps 1,
// 4's console part and 6 (the console, the SDK's example service) are not
// command lines and are not run here (the console has its own end-to-end
// tests; the example service TestSDKService).
func TestReadmeTour(t *testing.T) {
	lines := tourLines(t)
	for _, tool := range []string{"bash", "curl", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour needs %s (apt-get install %s), as make run does", tool, tool)
		}
	}
	sluicectl := mustTool(t, "sluicectl", "./controlplane/cmd/sluicectl")
	demoUpstream := mustTool(t, "demo-upstream", "./dataplane/cmd/demo-upstream")
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)

	// make run's demo: the demo upstream (and identity provider), its
	// tokens, the demo rules published through review, a gateway.
	work := t.TempDir()
	for _, d := range []string{"bin", ".run", "tmp", "config"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(sluicectl, filepath.Join(work, "bin", "sluicectl")); err != nil {
		t.Fatal(err)
	}
	idpKey := filepath.Join(work, ".run", "demo-idp.key")
	tokens, err := exec.Command(demoUpstream, "--jwt-key", idpKey, "--print-tokens").Output()
	if err != nil {
		t.Fatalf("demo-upstream --print-tokens: %v", err)
	}
	var demoTokens strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(string(tokens)), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 { // alice pro TOKEN, as make run writes them
			fmt.Fprintf(&demoTokens, "%s %s %s\n", f[0], f[1], f[2])
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".run/demo-tokens", demoTokens.String())
	write(".run/credentials", fmt.Sprintf("admin %s\nreviewer %s\n", h.password, h.password))
	upAddr := freeAddr(t)
	up := &proc{name: "demo-upstream", bin: demoUpstream, log: filepath.Join(h.dir, "demo-upstream.log"),
		args: []string{"--listen", upAddr, "--name", "demo", "--jwt-key", idpKey}}
	h.procs = append(h.procs, up)
	up.start(t)
	h.waitHTTP(up, "http://"+upAddr+"/healthz", 10*time.Second)

	demo, err := os.ReadFile(filepath.Join(root, "deploy", "rules", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h.author.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "demo", "description": "the tour"})
	v1, err := h.publishIn("demo", strings.ReplaceAll(string(demo), "127.0.0.1:8081", upAddr), "demo rules")
	if err != nil {
		t.Fatal(err)
	}
	gw := &gateway{id: "gw-1", listen: freeAddr(t), admin: freeAddr(t), stateDir: filepath.Join(h.dir, "state-gw-1")}
	gw.p = &proc{name: "sluice-gateway gw-1", bin: filepath.Join(h.bins, "sluice-gateway"), log: filepath.Join(h.dir, "gateway-gw-1.log"),
		args: []string{"--etcd", h.etcd.Addr(), "--namespace", "demo", "--node-id", gw.id, "--labels", "zone=local,name=gw-1",
			"--state-dir", gw.stateDir, "--listen", gw.listen, "--admin", gw.admin, "--trust-keys", h.trustFile,
			"--redis", "redis://127.0.0.1:6379", "--redis-prefix", "sluice-tour-" + randomHex(6) + ":", "--shutdown-timeout", "5s"}}
	h.procs = append(h.procs, gw.p)
	gw.p.start(t)
	h.waitHTTP(gw.p, "http://"+gw.admin+"/readyz", 30*time.Second)
	h.waitVersion(v1, 10*time.Second, gw)

	// The README's addresses are make run's; the test's are the system's.
	addrs := strings.NewReplacer("127.0.0.1:9000", gw.listen, "127.0.0.1:9901", gw.admin,
		"127.0.0.1:8080", strings.TrimPrefix(h.adminURL, "http://"), " /tmp/", " "+filepath.Join(work, "tmp")+"/")
	env := append(os.Environ(), "SLUICE_SERVER="+h.adminURL, "SLUICE_TOKEN=", "SLUICE_NAMESPACE=",
		"XDG_CONFIG_HOME="+filepath.Join(work, "config"), "HOME="+work)
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=\$\((.*)\)$`)
	exported := regexp.MustCompile(`sluicectl export .*>\s*(\S+)`)
	statusInComment := regexp.MustCompile(`#[^#]*\b([1-5][0-9][0-9])\b`)
	edited := false
	for _, raw := range lines {
		line := addrs.Replace(raw)
		cmdText := line
		if m := assign.FindStringSubmatch(line); m != nil {
			cmdText = m[2]
		}
		cmd := exec.Command("bash", "-c", cmdText)
		cmd.Dir, cmd.Env = work, env
		if strings.Contains(line, "sluicectl login") {
			cmd.Stdin = strings.NewReader(h.password + "\n") // "password from .run/credentials"
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want := 0
		if edited && strings.Contains(line, "sluicectl diff") {
			want = 2 // differences found, as diff(1)
		}
		t.Logf("$ %s\n%s", raw, trimOutput(out.String()))
		if code != want {
			t.Fatalf("README tour line %q: exit %d, want %d\nstdout: %s\nstderr: %s", raw, code, want, out.String(), errb.String())
		}
		if m := assign.FindStringSubmatch(line); m != nil {
			env = append(env, m[1]+"="+strings.TrimSpace(out.String()))
		}
		checkTourOutput(t, raw, out.String(), statusInComment)

		// What the tour asks of the reader between lines.
		if m := exported.FindStringSubmatch(line); m != nil {
			editRate(t, filepath.Join(work, strings.TrimPrefix(m[1], work)), "orders-per-ip", "5", "50")
			edited = true
		}
		if strings.Contains(line, "sluicectl apply") {
			m := regexp.MustCompile(`change (\d+) opened`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("apply printed no change id: %q", out.String())
			}
			id, _ := strconv.ParseInt(m[1], 10, 64)
			v2, err := h.approveAndPublishIn("demo", id) // "as reviewer: ... approve ID; ... publish ID"
			if err != nil {
				t.Fatal(err)
			}
			h.waitVersion(v2, 15*time.Second, gw)
		}
	}
}

// checkTourOutput checks what a tour line's comment promises: a status it
// names ("# a 429", "# no token: 401") is in the output, "pro tier" is a
// 200; a loop of requests sees its limit reject some (429) after admitting
// some (200).
func checkTourOutput(t *testing.T, line, out string, statusInComment *regexp.Regexp) {
	t.Helper()
	var want []string
	if m := statusInComment.FindStringSubmatch(line); m != nil {
		want = append(want, m[1])
	}
	if strings.Contains(line, "pro tier") {
		want = append(want, "200")
	}
	if strings.HasPrefix(line, "for i in") && strings.Contains(line, "%{http_code}") {
		want = append(want, "200", "429")
	}
	for _, w := range want {
		if !regexp.MustCompile(`(^|\D)` + w + `(\D|$)`).MatchString(out) {
			t.Errorf("README tour line %q: no %s in its output:\n%s", line, w, out)
		}
	}
}

// editRate changes limit id's rate from old to new in the YAML file path,
// as the tour asks ("rate: 5 → rate: 50 on orders-per-ip").
func editRate(t *testing.T, path, id, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "id: "+id+"\n")
	if i < 0 {
		t.Fatalf("no limit %s in the exported %s:\n%s", id, path, s)
	}
	j := strings.Index(s[i:], "rate: "+old+"\n")
	if j < 0 {
		t.Fatalf("limit %s has no rate %s in %s:\n%s", id, old, path, s)
	}
	s = s[:i+j] + "rate: " + new + "\n" + s[i+j+len("rate: "+old+"\n"):]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func trimOutput(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
