package api

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docSnippet is one fenced YAML block of a Markdown page.
type docSnippet struct {
	file string
	line int // the line of the opening fence
	body []byte
}

// yamlFence opens a YAML block: the fence may be indented (inside a list
// item), and the info string may carry more after the language.
var yamlFence = regexp.MustCompile("^([ \t]*)```(yaml|yml)\\b")

// wholeDocument tells a whole rule document (a top-level namespace) from a
// fragment that shows a few fields.
var wholeDocument = regexp.MustCompile(`(?m)^namespace:`)

// yamlSnippets returns the fenced YAML blocks of the Markdown file name,
// each with the fence's indentation removed from its lines.
func yamlSnippets(t *testing.T, name string) []docSnippet {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []docSnippet
	var cur *docSnippet
	var indent string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := yamlFence.FindStringSubmatch(line); m != nil {
				cur, indent = &docSnippet{file: name, line: n}, m[1]
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			out = append(out, *cur)
			cur = nil
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

// TestDocRuleSnippets decodes and validates every whole rule document shown
// in README.md and docs/*.md, the way `sluicectl validate` and the server
// do (Decode, then Validate). Fragments without a top-level namespace are
// skipped: they show a few fields, not a document.
func TestDocRuleSnippets(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"../README.md"}, pages...)
	whole := 0
	for _, page := range pages {
		for _, s := range yamlSnippets(t, page) {
			if !wholeDocument.Match(s.body) {
				continue
			}
			whole++
			where := fmt.Sprintf("%s:%d", strings.TrimPrefix(s.file, "../"), s.line)
			rs, err := Decode(s.body)
			if err == nil {
				err = rs.Validate()
			}
			for _, e := range AsErrors(err) {
				t.Errorf("%s: %s", where, e.Error())
			}
		}
	}
	// The pages do show whole documents (docs/rules.md, docs/sdk.md): finding
	// none means the extraction broke, not that there is nothing to check.
	if whole < 2 {
		t.Fatalf("found %d whole rule documents in README.md and docs/*.md, want at least 2", whole)
	}
}
