package api

import (
	"regexp"
	"testing"
)

func questionableBase() *RuleSet {
	return &RuleSet{Namespace: "shop",
		Routes: []Route{{ID: "orders", Match: Match{PathPrefix: "/orders"}, Upstream: Upstream{Targets: []Target{{URL: "http://127.0.0.1:8081"}}}}},
		Limits: []Limit{{ID: "per-key", Algorithm: TokenBucket, Rate: 10, Key: []string{"header:X-Api-Key"}}},
		Breakers: []Breaker{{ID: "b", Window: Duration(10e9), OpenFor: Duration(5e9), ErrorRatio: 0.5,
			Fallback: &BreakerFallback{ContentType: "text/plain"}}},
	}
}

// TestValidateQuestionableValues: values that passed before and that no one
// means: a media type "/", one header key twice in two cases, a failure
// status that is no error. (Target URL ports outside 1-65535 are refused by
// the URL grammar shared with the schema.)
func TestValidateQuestionableValues(t *testing.T) {
	t.Parallel()
	if err := questionableBase().Validate(); err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, tc := range []struct {
		desc   string
		mutate func(rs *RuleSet)
		path   string // "" means valid
	}{
		{"content type /", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "/" }, "breakers[0].fallback.contentType"},
		{"content type without subtype", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "text" }, "breakers[0].fallback.contentType"},
		{"content type without type", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "/json" }, "breakers[0].fallback.contentType"},
		{"content type bad parameter", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "text/plain; charset" }, "breakers[0].fallback.contentType"},
		{"content type with parameter", func(rs *RuleSet) { rs.Breakers[0].Fallback.ContentType = "text/html; charset=utf-8" }, ""},
		{"limit content type /", func(rs *RuleSet) { rs.Limits[0].Response = &LimitResponse{ContentType: "/"} }, "limits[0].response.contentType"},
		{"key header in two cases", func(rs *RuleSet) { rs.Limits[0].Key = []string{"header:X-Api-Key", "header:x-api-key"} }, "limits[0].key[1]"},
		{"degrade key header in two cases", func(rs *RuleSet) {
			rs.Degrades = []Degrade{{ID: "d", Mode: DegradeManual, Key: []string{"header:X-User", "header:X-USER"}}}
		}, "degrades[0].key[1]"},
		{"query names keep their case", func(rs *RuleSet) { rs.Limits[0].Key = []string{"query:user", "query:User"} }, ""},
		{"failure status 100", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses = []int{100} }, "breakers[0].failureStatuses[0]"},
		{"failure status 200", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses = []int{502, 200} }, "breakers[0].failureStatuses[1]"},
		{"failure status 302", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses = []int{302} }, "breakers[0].failureStatuses[0]"},
		{"failure statuses 429 and 503", func(rs *RuleSet) { rs.Breakers[0].FailureStatuses = []int{429, 503} }, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rs := questionableBase()
			tc.mutate(rs)
			err := rs.Validate()
			if tc.path == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantErrors(t, err, "", tc.path)
		})
	}
}

// TestSchemaPatternsAgree: the schema's contentType patterns say what the
// Go check says about the same strings. (Target URLs, ports included, are
// the schema agreement corpus's.)
func TestSchemaPatternsAgree(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	pattern := func(def, prop string) *regexp.Regexp {
		p := s["$defs"].(schemaNode)[def].(schemaNode)["properties"].(schemaNode)[prop].(schemaNode)["pattern"].(string)
		return regexp.MustCompile(p)
	}
	for _, def := range []string{"LimitResponse", "BreakerFallback"} {
		ct := pattern(def, "contentType")
		for _, v := range []string{"text/plain", "application/problem+json", "text/html; charset=utf-8", "text/html;charset=\"utf-8\"",
			"text/plain;", " text/plain ", "/", "text", "/json", "text/", "text/plain; charset", "text/plain;;", "a/b c",
			"text/plain\r\nX: y", "text/plain; a=b; c=d"} {
			var errs Errors
			validator{errs: &errs}.contentType("p", v)
			if got, want := ct.MatchString(v), len(errs) == 0; got != want {
				t.Errorf("%s.contentType %q: schema %v, Go %v", def, v, got, want)
			}
		}
	}
}
