package sluice_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// TestAuditActionsListsEveryAction fails when an Action constant of
// audit.go is missing from AuditActions (the list the API and the console
// offer), or the list holds one twice.
func TestAuditActionsListsEveryAction(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "audit.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			v := sp.(*ast.ValueSpec)
			for i, n := range v.Names {
				if !strings.HasPrefix(n.Name, "Action") || i >= len(v.Values) {
					continue
				}
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				consts = append(consts, s)
			}
		}
	}
	if len(consts) < 20 {
		t.Fatalf("found %d Action constants in audit.go; the parse is wrong", len(consts))
	}
	for _, c := range consts {
		if !slices.Contains(sluice.AuditActions, c) {
			t.Errorf("AuditActions lacks %q", c)
		}
	}
	seen := map[string]bool{}
	for _, a := range sluice.AuditActions {
		if seen[a] {
			t.Errorf("AuditActions holds %q twice", a)
		}
		seen[a] = true
	}
}
