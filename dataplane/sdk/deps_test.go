package sdk

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph: the SDK and its adapters bring no Gin, GORM or etcd
// server into a service (go list -deps over sdk/...), and only sluicegrpc
// imports google.golang.org/grpc itself (the etcd client underneath uses
// it as its transport). The policies the SDK runs (limit, breaker, degrade,
// admin) write their answers through package answer and never depend on
// proxy, degrade reads keys through reqview/classify and never depends on
// limit, and answer and classify sit at the bottom (api and reqview only).
func TestImportGraph(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !contains(deps, "github.com/sluicegw/sluice/dataplane/sdk/sluicegrpc") {
		t.Fatalf("go list listed %d packages; want the SDK's whole graph", len(deps))
	}
	for _, p := range deps {
		for _, banned := range []string{"github.com/gin-gonic/", "gorm.io/", "go.etcd.io/etcd/server/", "github.com/sluicegw/sluice/controlplane"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("the SDK imports %s", p)
			}
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, ".", "./sluicehttp").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "google.golang.org/grpc") {
		t.Errorf("a package other than sluicegrpc imports grpc:\n%s", out)
	}

	const dp = "github.com/sluicegw/sluice/dataplane/"
	for _, tc := range []struct {
		pkg    string
		banned []string // data plane packages it must not depend on
		only   []string // when set: the only data plane packages it may depend on
	}{
		{pkg: "limit", banned: []string{"proxy"}},
		{pkg: "breaker", banned: []string{"proxy"}},
		{pkg: "degrade", banned: []string{"proxy", "limit"}},
		{pkg: "admin", banned: []string{"proxy"}},
		{pkg: "answer", only: []string{"answer"}},
		{pkg: "reqview/classify", only: []string{"reqview/classify", "reqview"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "../"+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !contains(deps, dp+tc.pkg) {
			t.Fatalf("go list -deps %s did not list the package itself:\n%s", tc.pkg, out)
		}
		for _, p := range deps {
			name, ok := strings.CutPrefix(p, dp)
			if !ok {
				continue
			}
			if contains(tc.banned, name) || tc.only != nil && !contains(tc.only, name) {
				t.Errorf("%s depends on %s", tc.pkg, name)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
