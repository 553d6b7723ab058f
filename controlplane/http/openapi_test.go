package http_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	sluice "github.com/sluicegw/sluice/controlplane"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
)

var ginParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPICoversRoutes fails when a route registered in Gin is missing from
// api/openapi.yaml, or the spec names a route that does not exist.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatalf("parsing openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(spec.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1.x", spec.OpenAPI)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}
	inSpec := map[string]bool{}
	for path, item := range spec.Paths {
		for m := range item {
			if methods[m] {
				inSpec[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	srv, err := sluicehttp.New(sluicehttp.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	inGin := map[string]bool{}
	for _, r := range srv.Engine().Routes() {
		inGin[r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	var missing, extra []string
	for k := range inGin {
		if !inSpec[k] {
			missing = append(missing, k)
		}
	}
	for k := range inSpec {
		if !inGin[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	for _, k := range missing {
		t.Errorf("route %s is registered but not in api/openapi.yaml", k)
	}
	for _, k := range extra {
		t.Errorf("api/openapi.yaml names %s, which is not registered", k)
	}
	if len(inGin) < 30 {
		t.Errorf("only %d routes registered", len(inGin))
	}
}

// TestOpenAPIAuditActions fails when api/openapi.yaml's AuditAction enum
// differs from sluice.AuditActions (the console's audit filter offers the
// spec's list).
func TestOpenAPIAuditActions(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Components struct {
			Schemas struct {
				AuditAction struct {
					Enum []string `yaml:"enum"`
				} `yaml:"AuditAction"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatalf("parsing openapi.yaml: %v", err)
	}
	if got := spec.Components.Schemas.AuditAction.Enum; !slices.Equal(got, sluice.AuditActions) {
		t.Errorf("openapi.yaml AuditAction enum is\n%q\nwant sluice.AuditActions\n%q", got, sluice.AuditActions)
	}
}
