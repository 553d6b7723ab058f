package http_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"go.yaml.in/yaml/v3"
)

// The spec, loaded once: api/openapi.yaml with its references into
// api/schema.json resolved.
var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

func loadSpec() (*openapi3.T, routers.Router, error) {
	spec.once.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/yaml", yamlBodyDecoder)
		openapi3filter.RegisterBodyDecoder("application/problem+json", openapi3filter.JSONBodyDecoder)
		l := openapi3.NewLoader()
		l.IsExternalRefsAllowed = true
		spec.doc, spec.err = l.LoadFromFile("../../api/openapi.yaml")
		if spec.err != nil {
			return
		}
		inlineRefs(spec.doc)
		spec.router, spec.err = gorillamux.NewRouter(spec.doc)
	})
	return spec.doc, spec.router, spec.err
}

// inlineRefs drops the $ref strings of resolved schemas, so that the JSON
// Schema compiler of the 3.1 validator sees each schema whole: references
// inside api/schema.json ("#/$defs/id") mean that file, not openapi.yaml.
func inlineRefs(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil {
			return
		}
		r.Ref = ""
		s := r.Value
		if seen[s] {
			return
		}
		seen[s] = true
		for _, m := range []openapi3.Schemas{s.Properties, s.PatternProperties, s.DependentSchemas, s.Defs} {
			for _, p := range m {
				walk(p)
			}
		}
		for _, x := range []*openapi3.SchemaRef{s.Items, s.Not, s.AdditionalProperties.Schema, s.Contains, s.PropertyNames, s.If, s.Then, s.Else, s.ContentSchema} {
			walk(x)
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
			for _, x := range list {
				walk(x)
			}
		}
	}
	content := func(c openapi3.Content) {
		for _, mt := range c {
			walk(mt.Schema)
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value != nil {
					walk(p.Value.Schema)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				content(op.RequestBody.Value.Content)
			}
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					content(r.Value.Content)
					for _, h := range r.Value.Headers {
						if h.Value != nil {
							walk(h.Value.Schema)
						}
					}
				}
			}
		}
	}
}

func yamlBodyDecoder(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	var v any
	if err := yaml.NewDecoder(r).Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// specChecked wraps the API handler so that every exchange of a test is
// checked against api/openapi.yaml: every response (its status must be
// listed for the operation, its declared headers and body must match), and
// every request the server accepted (2xx). A refused request is meant to be
// wrong, so only its response is checked.
func specChecked(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	_, router, err := loadSpec()
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		t.Errorf("api/openapi.yaml: "+format, args...)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var reqBody []byte
		if r.Body != nil {
			reqBody, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())

		route, params, err := router.FindRoute(r)
		if err != nil {
			// Not an operation of the spec (unknown path or method): the
			// route test (TestOpenAPICoversRoutes) covers the registered ones.
			return
		}
		ctx := context.Background()
		check := r.Clone(ctx)
		check.Body = io.NopCloser(bytes.NewReader(reqBody))
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		what := r.Method + " " + r.URL.Path
		if rec.Code >= 200 && rec.Code < 300 {
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				report("request %s (answered %d) does not match: %v", what, rec.Code, err)
			}
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		respBody := rec.Body.Bytes()
		if rec.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(respBody))
			if err == nil {
				respBody, err = io.ReadAll(zr)
			}
			if err != nil {
				report("response %d to %s: bad gzip body: %v", rec.Code, what, err)
				return
			}
		}
		out.SetBodyBytes(respBody)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			body := string(respBody)
			if len(body) > 300 {
				body = body[:300] + "…"
			}
			report("response %d to %s does not match: %v\nbody: %s", rec.Code, what, strings.ReplaceAll(err.Error(), "\n", "\n  "), body)
		}
	})
}

// TestSpecLoads: the spec and its schema references load and route.
func TestSpecLoads(t *testing.T) {
	t.Parallel()
	doc, _, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if doc.Paths.Len() < 30 {
		t.Errorf("only %d paths", doc.Paths.Len())
	}
}

// recordingTB collects what specChecked reports instead of failing.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestSpecCheckerCatchesDrift: the checker every HTTP test runs through
// reports a status, header or body the spec does not describe, and a
// request the spec does not allow that the server accepted.
func TestSpecCheckerCatchesDrift(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		method  string
		path    string
		body    string
		handler http.HandlerFunc
		want    string // a substring of the report; "" means no report
	}{
		{desc: "a listed status and a matching body pass", method: "GET", path: "/api/v1/namespaces",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"items":[{"name":"shop","latestVersion":3}]}`))
			}},
		{desc: "an unlisted status", method: "GET", path: "/api/v1/namespaces",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }, want: "418"},
		{desc: "a body of the wrong shape", method: "GET", path: "/api/v1/namespaces",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"items":[{"name":7}]}`))
			}, want: "does not match"},
		{desc: "a problem without its code", method: "GET", path: "/api/v1/namespaces/shop",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"type":"x","title":"Not Found","status":404}`))
			}, want: "code"},
		{desc: "a rule set the schema refuses, accepted by the server", method: "PUT", path: "/api/v1/namespaces/shop/draft",
			body: `{"namespace":"shop","limits":[{"id":"l","algorithm":"nope","rate":1}]}`,
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"namespace":"shop","revision":2,"etag":"\"2\""}`))
			}, want: "request PUT"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			srv := httptest.NewServer(specChecked(rec, tc.handler))
			defer srv.Close()
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("If-Match", `"1"`)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got := strings.Join(rec.errors, "\n")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("unexpected report: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("report %q lacks %q", got, tc.want)
			}
		})
	}
}
