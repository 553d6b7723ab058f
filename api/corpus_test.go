package api

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// goOnly lists the rules of Validate that JSON Schema cannot express, each
// with the corpus documents (testdata/corpus/go-only/NAME.json) that break
// only that rule: Validate refuses them, and the schema must accept them. A
// rule leaves this list when the schema learns to express it (the test then
// fails until the documents move to invalid/).
var goOnly = map[string][]string{
	"a rule names a route that does not exist (a reference between rules)": {
		"ref-unknown-route", "ref-unknown-route-degrade"},
	"ids are unique within a kind (uniqueness of a property across list items)": {
		"duplicate-route-id", "duplicate-limit-id"},
	"a route has at most one breaker and one degrade plan (a reference between rules)": {
		"breakers-share-route", "degrades-share-route"},
	"pathRegex is RE2 syntax and compiles to at most MaxRegexInstructions instructions (a parser, not a pattern)": {
		"path-regex-invalid", "path-regex-backreference", "path-regex-program-too-large", "path-regex-repeat-over-cap"},
	"exempt entries are IP addresses or CIDRs as net/netip reads them (address syntax and mask ranges)": {
		"exempt-bad-cidr", "exempt-not-an-address"},
	"duration ranges: timeout ≤ 1h, period 1ms-24h, maxDelay ≤ 1m, windows 100ms-1h, openFor and slowCallDuration ≤ 1h, maxOpenFor ≤ 24h, and what fits in 64 bits (comparing the value of a duration string)": {
		"timeout-above-1h", "timeout-overflow", "period-below-1ms", "period-above-24h", "maxdelay-above-1m",
		"breaker-window-below-100ms", "breaker-openfor-above-1h", "breaker-maxopenfor-above-24h",
		"breaker-slow-duration-above-1h", "degrade-window-above-1h"},
	"maxOpenFor is not below openFor (comparing two fields)": {
		"breaker-maxopenfor-below-openfor"},
	"level 2 triggers are not looser than level 1's (comparing two fields)": {
		"degrade-level2-looser-qps", "degrade-level2-looser-success-rate"},
	"match header names are unique ignoring case (propertyNames cannot compare names)": {
		"header-names-differ-in-case"},
	"a JSON fallback body is at most MaxFallbackBodyBytes of compact JSON (the size of an arbitrary value)": {
		"degrade-fallback-json-too-large"},
	"upstream.tls.ca is PEM CERTIFICATE blocks that crypto/x509 parses (a parser, not a pattern)": {
		"upstream-tls-ca-not-pem", "upstream-tls-ca-private-key", "upstream-tls-ca-bad-der"},
	"reserve and shedOrder name declared classes (a reference between rules)": {
		"reserve-unknown-class", "shedorder-unknown-class"},
	"reserve shares and variant weights add up to less than 1 and at most 100 (a sum over a map or list)": {
		"reserve-shares-add-up-to-one", "variant-weights-above-100"},
	"adaptive maxLimit is not below minLimit (comparing two fields)": {
		"adaptive-max-below-min"},
	"jwt: key parts and tiers need an identity on every route of their rule (a reference between rules)": {
		"jwt-key-without-identity", "jwt-key-route-not-covered"},
	"a route has at most one identity (a reference between rules)": {
		"identities-share-route"},
	"only the last tier may leave out match (the position of an item in a list)": {
		"tier-default-not-last"},
	"tier ids are unique within a limit (uniqueness of a property across list items)": {
		"tier-duplicate-id"},
	"a quota's timezone is an IANA zone that time.LoadLocation knows (a database, not a pattern)": {
		"quota-timezone-unknown"},
	"in a kind: service document a rule names routes or resources, a resource has one breaker and one degrade plan, and a rule naming resources keys only on global, route and sdk: parts and has no cost; sdk: parts only on rules naming resources alone (conditions across fields and a reference between rules)": {
		"service-rule-names-nothing", "sdk-key-in-gateway", "resource-rule-keyed-on-ip", "sdk-key-on-route-rule",
		"resource-two-breakers", "resource-rule-with-cost"},
	"identity duration ranges: clockSkew ≤ 5m, jwks.refresh 1s-24h (comparing the value of a duration string)": {
		"identity-clock-skew-above-5m", "identity-refresh-below-1s"},
}

func mustCompileSchema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://github.com/sluicegw/sluice/api/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		tb.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		tb.Fatalf("compiling schema.json: %v", err)
	}
	return sch
}

// schemaVerdict validates a JSON document with the independent validator.
func schemaVerdict(tb testing.TB, sch *jsonschema.Schema, doc []byte) error {
	tb.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		tb.Fatalf("corpus document is not JSON: %v", err)
	}
	return sch.Validate(inst)
}

// goVerdict runs api.Decode and Validate.
func goVerdict(doc []byte) error {
	rs, err := Decode(doc)
	if err != nil {
		return err
	}
	return rs.Validate()
}

// TestSchemaAgreesWithValidate runs api/schema.json, through an independent
// JSON Schema validator (santhosh-tekuri/jsonschema), and Decode+Validate over
// the corpus in testdata/corpus: valid/ must pass both, invalid/ must fail
// both, go-only/ must fail Validate and pass the schema, each for a rule
// listed in goOnly. Any other outcome is a disagreement between the two
// descriptions of a rule document.
func TestSchemaAgreesWithValidate(t *testing.T) {
	t.Parallel()
	sch := mustCompileSchema(t)
	files, err := filepath.Glob("testdata/corpus/*/*.json")
	if err != nil {
		t.Fatal(err)
	}
	// The other JSON test documents are valid too.
	for _, f := range []string{"testdata/full.canonical.json", "testdata/defaults-explicit.json"} {
		files = append(files, f)
	}
	listed := map[string]string{}
	for rule, names := range goOnly {
		for _, n := range names {
			listed[n] = rule
		}
	}
	count := map[string]int{}
	for _, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if dir == "testdata" {
			dir = "valid"
		}
		count[dir]++
		t.Run(dir+"/"+name, func(t *testing.T) {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			gerr, serr := goVerdict(doc), schemaVerdict(t, sch, doc)
			var verr *jsonschema.ValidationError
			if serr != nil && !errors.As(serr, &verr) {
				t.Fatalf("schema validator: %v", serr)
			}
			switch dir {
			case "valid":
				if gerr != nil {
					t.Errorf("Validate refuses a valid document: %v", gerr)
				}
				if serr != nil {
					t.Errorf("the schema refuses a valid document: %v", serr)
				}
			case "invalid":
				if gerr == nil {
					t.Errorf("Validate accepts an invalid document")
				}
				if serr == nil {
					t.Errorf("the schema accepts an invalid document (Validate says: %v)", gerr)
				}
			case "go-only":
				if listed[name] == "" {
					t.Errorf("go-only document is not listed under a rule in goOnly")
				}
				if gerr == nil {
					t.Errorf("Validate accepts it; it should break: %s", listed[name])
				}
				if serr != nil {
					t.Errorf("the schema refuses it, so %q is expressible after all: move the document to invalid/ and drop it from goOnly: %v", listed[name], serr)
				}
			default:
				t.Fatalf("unknown corpus directory %q", dir)
			}
		})
	}
	for n := range listed {
		if _, err := os.Stat("testdata/corpus/go-only/" + n + ".json"); err != nil {
			t.Errorf("goOnly lists %s, which is not in testdata/corpus/go-only: %v", n, err)
		}
	}
	total := count["valid"] + count["invalid"] + count["go-only"]
	if total < 100 || count["valid"] < 20 || count["invalid"] < 50 {
		t.Errorf("corpus too small: %v", count)
	}
}

// TestSchemaPatternsAreGos checks that the schema spells the host and target
// URL patterns exactly as Validate compiles them.
func TestSchemaPatternsAreGos(t *testing.T) {
	t.Parallel()
	root := loadSchema(t)
	defs := root["$defs"].(schemaNode)
	prop := func(def, name string) schemaNode {
		return defs[def].(schemaNode)["properties"].(schemaNode)[name].(schemaNode)
	}
	tests := []struct {
		desc string
		got  any
		want string
	}{
		{"Match.hosts[]", prop("Match", "hosts")["items"].(schemaNode)["pattern"], HostPatternSource},
		{"Target.url", prop("Target", "url")["pattern"], TargetURLPatternSource},
		{"UpstreamTLS.ca", prop("UpstreamTLS", "ca")["pattern"], CAPatternSource},
		{"UpstreamTLS.serverName", prop("UpstreamTLS", "serverName")["pattern"], ServerNamePatternSource},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("schema pattern\n%v\nGo pattern\n%v", tt.got, tt.want)
			}
		})
	}
}

var targetURLSeeds = []string{
	"http://h", "HTTP://H:1/", "h2c://a_b.c-d:65535/x/%20/~", "https://[::1]:8443/p", "http://[1:2:3:4:5:6:7:8]",
	"http://[::1::2]", "http://[::1", "http://h:0", "http://h:080", "http://h:65536", "http://h/a b", "http://h/%zz",
	"http://-h", "http://h-/", "ftp://h", "http:/h", "http//h", "http://", "http://h?x", "http://u@h", "http://a..b",
	"http://" + strings.Repeat("a", 64), "http://h/@:;=,", "://h", "http://[v1.x]", "http://[::ffff:1.2.3.4]",
}

// TestMatchTargetURL checks that the split matcher Validate uses agrees with
// TargetURLPatternSource, the pattern the schema holds.
func TestMatchTargetURL(t *testing.T) {
	t.Parallel()
	whole := regexp.MustCompile(TargetURLPatternSource)
	for _, s := range targetURLSeeds {
		if got, want := matchTargetURL(s), whole.MatchString(s); got != want {
			t.Errorf("matchTargetURL(%q) = %v; the whole pattern says %v", s, got, want)
		}
	}
}

// FuzzMatchTargetURL explores TestMatchTargetURL's property.
func FuzzMatchTargetURL(f *testing.F) {
	for _, s := range targetURLSeeds {
		f.Add(s)
	}
	whole := regexp.MustCompile(TargetURLPatternSource)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := matchTargetURL(s), whole.MatchString(s); got != want {
			t.Errorf("matchTargetURL(%q) = %v; the whole pattern says %v", s, got, want)
		}
	})
}
