package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docSnippet is one fenced YAML block of a Markdown page.
type docSnippet struct {
	file string
	line int // the line of the opening fence
	body []byte
	// mark is the marker comment on the last non-blank line before the
	// fence, if any: "invalid" (an example of a document the validator
	// refuses) or "not-rules" (YAML that is not a rule document, such as a
	// CI workflow), with its reason.
	mark, reason string
}

// yamlFence opens a YAML block: the fence may be indented (inside a list
// item), and the info string may carry more after the language.
var yamlFence = regexp.MustCompile("^([ \t]*)```(yaml|yml)\\b")

// docMarker is a marker comment before a fence: `<!-- invalid: REASON -->`
// or `<!-- not-rules: REASON -->`.
var docMarker = regexp.MustCompile(`^\s*<!--\s*([a-z-]+):\s*(.*?)\s*-->\s*$`)

// wholeDocument tells a whole rule document (a top-level namespace) from a
// fragment that shows a few rules or fields.
var wholeDocument = regexp.MustCompile(`(?m)^namespace:`)

// yamlSnippets returns the fenced YAML blocks of the Markdown file name,
// each with the fence's indentation removed from its lines and the marker
// comment before it, if any.
func yamlSnippets(t *testing.T, name string) []docSnippet {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []docSnippet
	var cur *docSnippet
	var indent, lastText string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := yamlFence.FindStringSubmatch(line); m != nil {
				cur, indent = &docSnippet{file: name, line: n}, m[1]
				if mk := docMarker.FindStringSubmatch(lastText); mk != nil {
					cur.mark, cur.reason = mk[1], mk[2]
				}
			}
			if strings.TrimSpace(line) != "" {
				lastText = line
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			out = append(out, *cur)
			cur, lastText = nil, line
			continue
		}
		cur.body = append(cur.body, strings.TrimPrefix(line, indent)...)
		cur.body = append(cur.body, '\n')
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a yaml block is never closed", name, cur.line)
	}
	return out
}

// ruleKinds are a rule document's top-level keys that hold rules (the
// json tags of RuleSet's lists).
var ruleKinds = []string{"routes", "limits", "breakers", "degrades", "classes", "identities"}

// docFragmentNamespace is the namespace a fragment is validated in.
const docFragmentNamespace = "docs"

// wrapFragment makes the rule fragment part (one YAML document of a fenced
// block without a top-level namespace) into whole rule documents, as JSON,
// of which at least one must validate (only one, unless it is one rule's
// fields that several kinds of rule can have): a fragment whose top-level keys are a rule set's
// fields (routes, limits, ..., kind) gets a namespace; a fragment that is
// one rule's fields (it has an id) becomes that rule of each kind whose
// fields it can have (decided by Unmarshal's strict field check, so a limit's
// fields are never taken for a breaker). Either way, each route the rules
// name that the fragment does not define is added with a path prefix (and,
// in a gateway document, an upstream), and the document is a service's
// (kind: service) when a rule names resources. It returns an error when the
// part is neither.
func wrapFragment(part []byte) ([][]byte, error) {
	var top map[string]any
	if err := yaml.Unmarshal(part, &top); err != nil {
		return nil, fmt.Errorf("not a YAML mapping: %v", err)
	}
	if len(top) == 0 {
		return nil, fmt.Errorf("an empty fragment")
	}
	rulesetKeys := append([]string{"kind"}, ruleKinds...)
	var docs []map[string]any
	var other []string
	for k := range top {
		if !slices.Contains(rulesetKeys, k) {
			other = append(other, k)
		}
	}
	switch {
	case len(other) == 0:
		docs = append(docs, top)
	case top["id"] != nil:
		raw, err := json.Marshal(top)
		if err != nil {
			return nil, err
		}
		for _, k := range ruleKinds {
			if decodesAs(raw, k) {
				docs = append(docs, map[string]any{k: []any{top}})
			}
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("one rule's fields, but no kind of rule has them all")
		}
	default:
		sort.Strings(other)
		return nil, fmt.Errorf("top-level keys %v are neither a rule set's fields nor a rule's (no id)", other)
	}
	var out [][]byte
	for _, doc := range docs {
		completeFragment(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// decodesAs reports whether raw (one rule's fields as JSON) decodes, with
// Decode's strict field check, as a rule of the rule-set key kind.
func decodesAs(raw []byte, kind string) bool {
	var err error
	switch kind {
	case "routes":
		err = Unmarshal(raw, &Route{})
	case "limits":
		err = Unmarshal(raw, &Limit{})
	case "breakers":
		err = Unmarshal(raw, &Breaker{})
	case "degrades":
		err = Unmarshal(raw, &Degrade{})
	case "classes":
		err = Unmarshal(raw, &Class{})
	case "identities":
		err = Unmarshal(raw, &Identity{})
	default:
		return false
	}
	return err == nil
}

// completeFragment gives doc, a fragment's rule set, what a whole document
// needs around the rules it shows: a namespace, kind service when a rule
// names resources, and each route a rule names that doc lacks.
func completeFragment(doc map[string]any) {
	if doc["namespace"] == nil {
		doc["namespace"] = docFragmentNamespace
	}
	defined := map[string]bool{}
	routes, _ := doc["routes"].([]any)
	for _, r := range routes {
		if m, ok := r.(map[string]any); ok {
			defined[fmt.Sprint(m["id"])] = true
		}
	}
	var named []string
	service := false
	for _, kind := range ruleKinds {
		rules, _ := doc[kind].([]any)
		for _, r := range rules {
			m, ok := r.(map[string]any)
			if !ok {
				continue
			}
			if m["resources"] != nil {
				service = true
			}
			refs, _ := m["routes"].([]any)
			if match, ok := m["match"].(map[string]any); ok && kind == "classes" {
				more, _ := match["routes"].([]any)
				refs = append(refs, more...)
			}
			for _, id := range refs {
				if s := fmt.Sprint(id); !defined[s] && !slices.Contains(named, s) {
					named = append(named, s)
				}
			}
		}
	}
	if service && doc["kind"] == nil {
		doc["kind"] = string(KindService)
	}
	sort.Strings(named)
	for _, id := range named {
		r := map[string]any{"id": id, "match": map[string]any{"pathPrefix": "/" + id}}
		if doc["kind"] != string(KindService) {
			r["upstream"] = map[string]any{"targets": []any{map[string]any{"url": "http://127.0.0.1:8081"}}}
		}
		routes = append(routes, r)
	}
	if len(routes) > 0 {
		doc["routes"] = routes
	}
}

// yamlDocuments splits a fenced block into its YAML documents (at `---`
// lines), dropping ones that hold only comments.
func yamlDocuments(body []byte) [][]byte {
	var out [][]byte
	for _, part := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(body), -1) {
		for _, l := range strings.Split(part, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				out = append(out, []byte(part))
				break
			}
		}
	}
	return out
}

// TestDocRuleSnippets decodes and validates every rule example shown in
// README.md and docs/*.md, the way `sluicectl validate` and the server do
// (Decode, then Validate): whole documents as they are, fragments (a few
// rules, or one rule's fields) wrapped into a minimal whole document by
// wrapFragment. A block marked `<!-- invalid: REASON -->` must fail; one
// marked `<!-- not-rules: REASON -->` (a CI workflow) is not a rule
// document; any other YAML block that is neither a document nor a fragment
// fails the test.
func TestDocRuleSnippets(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"../README.md"}, pages...)
	whole, fragments := 0, 0
	for _, page := range pages {
		for _, s := range yamlSnippets(t, page) {
			where := fmt.Sprintf("%s:%d", strings.TrimPrefix(s.file, "../"), s.line)
			switch {
			case s.mark == "not-rules" || s.mark == "invalid":
				if s.reason == "" {
					t.Errorf("%s: the %s marker gives no reason", where, s.mark)
				}
			case s.mark != "":
				t.Errorf("%s: unknown marker %q before the yaml block (invalid: or not-rules:)", where, s.mark)
				continue
			}
			if s.mark == "not-rules" {
				continue
			}
			// Each element: the documents of which one must validate.
			var docs [][][]byte
			if wholeDocument.Match(s.body) {
				whole++
				docs = [][][]byte{{s.body}}
			} else {
				for _, part := range yamlDocuments(s.body) {
					wrapped, err := wrapFragment(part)
					if err != nil {
						t.Errorf("%s: a yaml block that is not a rule document or fragment (%v): mark it <!-- not-rules: REASON -->", where, err)
						continue
					}
					fragments++
					docs = append(docs, wrapped)
				}
			}
			for _, alternatives := range docs {
				var first error
				valid := false
				for i, doc := range alternatives {
					rs, err := Decode(doc)
					if err == nil {
						err = rs.Validate()
					}
					valid = valid || err == nil
					if i == 0 {
						first = err
					}
				}
				switch {
				case s.mark == "invalid" && valid:
					t.Errorf("%s: marked invalid (%s) but it validates", where, s.reason)
				case s.mark != "invalid" && !valid:
					for _, e := range AsErrors(first) {
						t.Errorf("%s: %s", where, e.Error())
					}
				}
			}
		}
	}
	// The pages do show whole documents (docs/rules.md, docs/sdk.md) and
	// fragments (docs/identity.md): finding none means the extraction
	// broke, not that there is nothing to check.
	if whole < 2 || fragments < 1 {
		t.Fatalf("found %d whole rule documents and %d fragments in README.md and docs/*.md, want at least 2 and 1", whole, fragments)
	}
}

// TestDocFragmentWrap checks wrapFragment on fragments of each shape: the
// rules it wraps validate or fail as they would in a whole document.
func TestDocFragmentWrap(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, fragment string
		valid          bool
	}{
		{"kinds naming a route", "limits:\n  - {id: l, routes: [orders], key: [ip], algorithm: token_bucket, rate: 5}\n", true},
		{"one limit's fields", "id: l\nroutes: [orders]\nkey: [ip]\nalgorithm: token_bucket\nrate: 5\n", true},
		{"one breaker's fields", "{id: b, routes: [orders], window: 10s, errorRatio: 0.5, openFor: 5s}\n", true},
		{"a limit naming resources", "limits:\n  - {id: l, resources: [db.Query], algorithm: concurrency, rate: 20}\n", true},
		{"a class naming a route", "classes:\n  - {id: batch, match: {routes: [orders], methods: [POST]}}\n", true},
		{"a bad algorithm", "limits:\n  - {id: l, routes: [orders], algorithm: magic, rate: 5}\n", false},
		{"one rule's bad field", "id: l\nroutes: [orders]\nalgorithm: token_bucket\nrate: -1\n", false},
		{"an upstream in a service", "kind: service\nroutes:\n  - {id: r, match: {pathPrefix: /r}, upstream: {targets: [{url: \"http://127.0.0.1:1\"}]}}\n", false},
	}
	for _, c := range cases {
		docs, err := wrapFragment([]byte(c.fragment))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		valid := false
		for _, doc := range docs {
			rs, err := Decode(doc)
			if err == nil {
				err = rs.Validate()
			}
			valid = valid || err == nil
		}
		if valid != c.valid {
			t.Errorf("%s: valid %v, want %v (%s)", c.name, valid, c.valid, docs)
		}
	}
	for _, notRules := range []string{"on: push\njobs: {}\n", "- a\n- b\n", "{}\n", "{id: x, frobnicate: 1}\n"} {
		if docs, err := wrapFragment([]byte(notRules)); err == nil {
			t.Errorf("%q taken for a rule fragment: %s", notRules, docs)
		}
	}
}
