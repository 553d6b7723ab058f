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

// shBlock is one fenced sh block of a Markdown page: its command lines,
// each unindented, continuation lines (a trailing \) joined, comment lines
// and blank ones left out; and the reason a `<!-- not-tested: REASON -->`
// comment before the fence gives for not running it.
type shBlock struct {
	line      int // the line of the opening fence
	lines     []string
	notTested string
}

var (
	shFence       = regexp.MustCompile("^\\s*```(sh|bash|shell|console)\\s*$")
	notTestedMark = regexp.MustCompile(`^\s*<!--\s*not-tested:\s*(.*?)\s*-->\s*$`)
)

// shBlocks returns the sh blocks of the Markdown text doc, whose first line
// is line first of its file.
func shBlocks(doc string, first int) []shBlock {
	var out []shBlock
	var cur *shBlock
	last, pending := "", ""
	for i, l := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case cur == nil && shFence.MatchString(l):
			cur = &shBlock{line: first + i}
			if m := notTestedMark.FindStringSubmatch(last); m != nil {
				cur.notTested = m[1]
				if cur.notTested == "" {
					cur.notTested = "(no reason given)"
				}
			}
		case cur != nil && t == "```":
			out = append(out, *cur)
			cur, pending = nil, ""
		case cur != nil && strings.HasSuffix(t, "\\"):
			pending += strings.TrimSuffix(t, "\\")
		case cur != nil && (pending != "" || t != "" && !strings.HasPrefix(t, "#")):
			cur.lines = append(cur.lines, pending+t)
			pending = ""
		}
		if t != "" {
			last = l
		}
	}
	return out
}

// tourLines are the command lines of README.md's tour: the sh code blocks
// of its "## ... tour ..." section.
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
	for _, b := range shBlocks(section, 1) {
		lines = append(lines, b.lines...)
	}
	if len(lines) == 0 {
		tb.Fatal("README.md's tour has no sh code blocks")
	}
	return lines
}

// demoStack is the stack make run starts, on ports the system picks:
// sluice-admin signing what it publishes, the demo rules
// (deploy/rules/demo.yaml) published to namespace demo through review, the
// demo upstream with its identity provider, a gateway gw-1 following etcd
// with Redis, and a working directory like the repository's after make run:
// .run/credentials and .run/demo-tokens as make run writes them,
// bin/sluicectl, bin/sluice-gateway and bin/sluice-admin (also on PATH),
// deploy/ (the repository's).
type demoStack struct {
	h    *harness
	gw   *gateway
	work string
	env  []string
	// addrs maps the docs' addresses (make run's) to the stack's, /tmp to
	// a temporary directory.
	addrs *strings.Replacer
}

func newDemoStack(t *testing.T) *demoStack {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the docs' command lines need %s (apt-get install %s), as make run does", tool, tool)
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
	for name, target := range map[string]string{"bin/sluicectl": sluicectl,
		"bin/sluice-gateway": filepath.Join(h.bins, "sluice-gateway"), "bin/sluice-admin": filepath.Join(h.bins, "sluice-admin"),
		"deploy": filepath.Join(root, "deploy")} {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
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

	return &demoStack{h: h, gw: gw, work: work,
		addrs: strings.NewReplacer("127.0.0.1:9000", gw.listen, "127.0.0.1:9901", gw.admin,
			"127.0.0.1:8080", strings.TrimPrefix(h.adminURL, "http://"), " /tmp/", " "+filepath.Join(work, "tmp")+"/"),
		env: append(os.Environ(), "PATH="+filepath.Join(work, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
			"SLUICE_SERVER="+h.adminURL, "SLUICE_TOKEN=", "SLUICE_NAMESPACE=", "SLUICE_NODE_ADMIN="+gw.admin,
			"XDG_CONFIG_HOME="+filepath.Join(work, "config"), "HOME="+work)}
}

// assignLine is a line that sets a shell variable from a command's output
// (ALICE=$(awk ...)): the command runs, and later lines see the variable.
var assignLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=\$\((.*)\)$`)

// run runs a docs' command line in bash in the stack's working directory,
// as a reader would after make run: the docs' addresses mapped to the
// stack's; a login reads the password from stdin; a variable assignment
// is kept for the lines after it; curl, unless the line's comment names the
// status to expect, fails on an HTTP error status (--fail). It returns the line's stdout and stderr
// and its exit status.
func (s *demoStack) run(t *testing.T, raw string) (stdout, stderr string, code int) {
	t.Helper()
	line := s.addrs.Replace(raw)
	cmdText := line
	m := assignLine.FindStringSubmatch(line)
	if m != nil {
		cmdText = m[2]
	}
	if strings.HasPrefix(cmdText, "curl ") && !statusInComment.MatchString(cmdText) {
		// A status the comment does not name must not be an error: a
		// misspelt path would otherwise pass as its 404 page.
		cmdText = "curl --fail " + strings.TrimPrefix(cmdText, "curl ")
	}
	cmd := exec.Command("bash", "-c", cmdText)
	cmd.Dir, cmd.Env = s.work, s.env
	if strings.Contains(line, "sluicectl login") {
		cmd.Stdin = strings.NewReader(s.h.password + "\n") // "password from .run/credentials"
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if m != nil && code == 0 {
		s.env = append(s.env, m[1]+"="+strings.TrimSpace(out.String()))
	}
	t.Logf("$ %s\n%s", raw, trimOutput(out.String()))
	return out.String(), errb.String(), code
}

// TestDocCommands runs the command lines the docs give a reader of make
// run, against one stack started the way make run starts it (demoStack):
// first README.md's 5-minute tour (subtest "README tour"), then every sh
// block of docs/*.md (a subtest per page). Each line runs in bash and must
// exit 0 (or the status its comment names: "# exit 2 ..."); a line whose
// comment names an HTTP status (a 429, no token: 401) must show it. A docs
// block that cannot run against make run (a server to start, Kubernetes,
// etcdctl) carries `<!-- not-tested: REASON -->` on the line before its
// fence; an unmarked block with a line that is not one of the commands the
// stack answers (docLineRunnable) fails the test.
func TestDocCommands(t *testing.T) {
	s := newDemoStack(t)
	if !t.Run("README tour", func(t *testing.T) { runTour(t, s) }) {
		t.Log("the README tour failed; the docs pages still run")
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The docs' read commands need a session; the tour's login made one,
	// but a run of one page alone (-run TestDocCommands/docs) has none.
	if _, stderr, code := s.run(t, "bin/sluicectl login --username admin"); code != 0 {
		t.Fatalf("sluicectl login: exit %d: %s", code, stderr)
	}
	ran, excused := 0, 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel := "docs/" + filepath.Base(page)
		for _, blk := range shBlocks(string(b), 1) {
			if blk.notTested != "" {
				excused++
				t.Logf("%s:%d: not tested: %s", rel, blk.line, blk.notTested)
				continue
			}
			ran++
			t.Run(fmt.Sprintf("%s:%d", rel, blk.line), func(t *testing.T) {
				for _, l := range blk.lines {
					if why := docLineRunnable(l); why != "" {
						t.Fatalf("%s:%d: %q cannot run against make run's stack (%s): fix it, or mark the block <!-- not-tested: REASON --> on the line before its fence", rel, blk.line, l, why)
					}
				}
				for _, l := range blk.lines {
					stdout, stderr, code := s.run(t, l)
					if want := wantExit(l); code != want {
						t.Fatalf("%s:%d: %q: exit %d, want %d\nstdout: %s\nstderr: %s", rel, blk.line, l, code, want, stdout, stderr)
					}
					checkLineOutput(t, l, stdout)
				}
			})
		}
	}
	t.Logf("docs/*.md: %d sh blocks run, %d not tested (each with its reason)", ran, excused)
	// The pages do show runnable blocks (docs/sluicectl.md, docs/gateway.md):
	// running none means the extraction broke.
	if ran < 2 {
		t.Fatalf("ran %d sh blocks of docs/*.md, want at least 2", ran)
	}
}

// sluicectlRead are the sluicectl commands (with their subcommand, if any)
// that only read, which the docs' blocks may run against the shared stack.
var sluicectlRead = map[string]bool{
	"validate": true, "diff": true, "export": true, "version": true, "login": true,
	"changes list": true, "changes show": true, "versions list": true, "versions show": true, "versions diff": true,
	"nodes list": true, "node status": true, "node breakers": true, "node degrades": true, "audit verify": true,
}

var (
	curlURL   = regexp.MustCompile(`https?://127\.0\.0\.1:(9000|9901|8080)/`)
	curlWrite = regexp.MustCompile(`(^|\s)((-X|--request)\s*(POST|PUT|PATCH|DELETE)|--json|-d|--data\S*|-F|--form|-T|--upload-file)(\s|$)`)
	forLoop   = regexp.MustCompile(`^for \w+ in \$\(seq \d+\); do (.*); done$`)
)

// docLineRunnable says why the command line l (of a docs' block) cannot run
// against the shared stack, or "" when it can: a sluicectl read command
// (sluicectlRead), curl reading make run's gateway (:9000), its admin
// endpoint (:9901) or the control plane (:8080), sluice-gateway or
// sluice-admin --version, sluice-admin keygen, an awk of .run/ files, each
// alone, assigned to a variable or in a `for i in $(seq N)` loop. What
// writes (a POST, apply, publish) would change the stack the other pages
// run against.
func docLineRunnable(l string) string {
	if m := assignLine.FindStringSubmatch(l); m != nil {
		l = m[2]
	}
	if m := forLoop.FindStringSubmatch(l); m != nil {
		l = m[1]
	}
	l = strings.TrimSpace(strings.SplitN(l, " #", 2)[0])
	f := strings.Fields(l)
	if len(f) == 0 {
		return "an empty command"
	}
	for _, op := range []string{"|", "&&", "||", ";"} {
		if strings.Contains(l, " "+op+" ") {
			return "more than one command"
		}
	}
	switch prog := strings.TrimPrefix(f[0], "bin/"); prog {
	case "sluicectl":
		var words []string
		for _, w := range f[1:] {
			if strings.HasPrefix(w, "-") {
				break
			}
			words = append(words, w)
		}
		if len(words) == 0 {
			return "sluicectl without a command"
		}
		if sluicectlRead[words[0]] || len(words) > 1 && sluicectlRead[words[0]+" "+words[1]] {
			return ""
		}
		return "sluicectl " + words[0] + " is not a read command"
	case "curl":
		if !curlURL.MatchString(l) {
			return "curl of an address make run does not serve (127.0.0.1:9000, :9901, :8080)"
		}
		if curlWrite.MatchString(l) {
			return "curl sending a request that writes"
		}
		return ""
	case "sluice-gateway", "sluice-admin":
		if len(f) == 2 && f[1] == "--version" || prog == "sluice-admin" && len(f) > 1 && f[1] == "keygen" {
			return ""
		}
		return prog + " serving (only --version and keygen run offline)"
	case "awk":
		if strings.Contains(l, ".run/") {
			return ""
		}
		return "awk of a file make run does not write"
	}
	return f[0] + " is not a command the stack answers"
}

// wantExit is the exit status line's comment names ("# exit 2: ..."), else 0.
func wantExit(line string) int {
	if m := regexp.MustCompile(`#.*\bexit (\d+)\b`).FindStringSubmatch(line); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// runTour runs the command lines of README.md's 5-minute tour as a reader
// of the README would after make run. Each line must exit 0 (a diff of an
// edited file: 2); a line whose comment names a status (a 429, no token:
// 401) must show it. Between lines the test does what the tour asks the
// reader to do: edit the exported file (orders-per-ip's rate 5 → 50), and,
// as the reviewer, approve and publish the change apply opened (its comment
// line). Steps 1, 4's console part and 6 (the console, the SDK's example
// service) are not command lines and are not run here (the console has its
// own end-to-end tests; the example service TestSDKService).
func runTour(t *testing.T, s *demoStack) {
	exported := regexp.MustCompile(`sluicectl export .*>\s*(\S+)`)
	edited := false
	lines := tourLines(t)
	for i, raw := range lines {
		line := s.addrs.Replace(raw)
		stdout, stderr, code := s.run(t, raw)
		want := 0
		if edited && strings.Contains(line, "sluicectl diff") {
			want = 2 // differences found, as diff(1)
		}
		if code != want {
			t.Fatalf("README tour line %q: exit %d, want %d\nstdout: %s\nstderr: %s", raw, code, want, stdout, stderr)
		}
		if missing := lineOutputMissing(raw, stdout); len(missing) > 0 && (forLoop.MatchString(raw) || i > 0 && forLoop.MatchString(lines[i-1])) {
			// A loop spends a limit to show its 429, or the line after
			// it finds the limit spent; on a loaded machine the loop can
			// take long enough for the limit to refill. Once more (the
			// loop, then the line), then it must hold.
			t.Logf("README tour line %q: no %v in its output; once more", raw, missing)
			if !forLoop.MatchString(raw) {
				s.run(t, lines[i-1])
			}
			stdout, _, _ = s.run(t, raw)
		}
		checkLineOutput(t, raw, stdout)

		// What the tour asks of the reader between lines.
		if m := exported.FindStringSubmatch(line); m != nil {
			editRate(t, filepath.Join(s.work, strings.TrimPrefix(m[1], s.work)), "orders-per-ip", "5", "50")
			edited = true
		}
		if strings.Contains(line, "sluicectl apply") {
			m := regexp.MustCompile(`change (\d+) opened`).FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("apply printed no change id: %q", stdout)
			}
			id, _ := strconv.ParseInt(m[1], 10, 64)
			v2, err := s.h.approveAndPublishIn("demo", id) // "as reviewer: ... approve ID; ... publish ID"
			if err != nil {
				t.Fatal(err)
			}
			s.h.waitVersion(v2, 15*time.Second, s.gw)
		}
	}
}

// statusInComment is an HTTP status a line's comment names ("# a 429",
// "# no token: 401").
var statusInComment = regexp.MustCompile(`#[^#]*\b([1-5][0-9][0-9])\b`)

// checkLineOutput checks what a docs' line's comment promises: a status it
// names ("# a 429", "# no token: 401") is in the output, "pro tier" is a
// 200; a loop of requests sees its limit reject some (429) after admitting
// some (200).
func checkLineOutput(t *testing.T, line, out string) {
	t.Helper()
	for _, w := range lineOutputMissing(line, out) {
		t.Errorf("line %q: no %s in its output:\n%s", line, w, out)
	}
}

// lineOutputMissing returns the statuses line's comment promises (see
// checkLineOutput) that out lacks.
func lineOutputMissing(line, out string) []string {
	var want, missing []string
	if m := statusInComment.FindStringSubmatch(line); m != nil && !regexp.MustCompile(`#.*\bexit \d+`).MatchString(line) {
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
			missing = append(missing, w)
		}
	}
	return missing
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

// TestDocCommandRules checks, without a stack, how TestDocCommands reads
// the docs: sh blocks with their not-tested markers and continuation
// lines, and which command lines it takes for ones the stack answers.
func TestDocCommandRules(t *testing.T) {
	t.Parallel()
	page := "intro\n\n<!-- not-tested: needs Kubernetes -->\n```sh\nhelm install x \\\n  --set a=b\n```\n\n" +
		"- a list item:\n\n  ```sh\n  # a comment\n  curl -s http://127.0.0.1:9901/status\n\n  ```\n```yaml\nnot: sh\n```\n"
	blocks := shBlocks(page, 1)
	if len(blocks) != 2 {
		t.Fatalf("got %d sh blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.line != 4 || b.notTested != "needs Kubernetes" || len(b.lines) != 1 || b.lines[0] != "helm install x --set a=b" {
		t.Errorf("first block %+v", b)
	}
	if b := blocks[1]; b.line != 11 || b.notTested != "" || len(b.lines) != 1 || b.lines[0] != "curl -s http://127.0.0.1:9901/status" {
		t.Errorf("second block %+v", b)
	}
	for _, l := range []string{
		"bin/sluicectl versions list -n demo",
		"sluicectl node status --admin 127.0.0.1:9901   # gw-1",
		"bin/sluicectl diff /tmp/demo.yaml",
		"curl -si http://127.0.0.1:9000/api/orders   # a 429",
		"for i in $(seq 8); do curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:9000/api/account; done",
		"ALICE=$(awk '$1 == \"alice\" {print $3}' .run/demo-tokens)",
		"bin/sluice-gateway --version",
		"bin/sluice-admin keygen --private /tmp/k --public /tmp/p",
	} {
		if why := docLineRunnable(l); why != "" {
			t.Errorf("%q not taken for runnable: %s", l, why)
		}
	}
	for _, l := range []string{
		"bin/sluicectl apply /tmp/demo.yaml --title x",
		"sluicectl changes publish 3",
		"sluicectl nodes drain gw-1",
		"curl --json '{\"rule\":\"checkout\",\"level\":1,\"ttl\":\"10m\"}' http://127.0.0.1:9901/degrade",
		"curl -X DELETE http://127.0.0.1:8080/api/v1/namespaces/demo",
		"curl --request PUT -d @f http://127.0.0.1:8080/api/v1/namespaces/demo/draft",
		"curl -s https://sluice.example.com/healthz",
		"sluice-gateway --rules rules.yaml --listen :9000",
		"etcdctl auth enable",
		"curl -s http://127.0.0.1:9901/status | jq .version",
		"awk '{print}' /etc/passwd",
	} {
		if docLineRunnable(l) == "" {
			t.Errorf("%q taken for runnable", l)
		}
	}
	if wantExit("bin/sluicectl diff f   # exit 2: differences") != 2 || wantExit("bin/sluicectl export") != 0 {
		t.Error("wantExit does not read the status a comment names")
	}
}
