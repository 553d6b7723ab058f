package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicegw/sluice/api"
)

// ruleFile is a rule-set file read, decoded and validated like the server does.
type ruleFile struct {
	name string
	data []byte
	rs   *api.RuleSet
	errs api.Errors
}

// readRuleFile reads and checks name. A file that cannot be read, is over
// the document limit or is not a rule-set document is an error; a document
// with wrong fields is returned with its errs set.
func readRuleFile(name string) (*ruleFile, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("reading %s: is a directory", name)
	}
	if st.Size() > api.MaxDocumentBytes {
		return nil, fmt.Errorf("%s: file is %d bytes; a rule-set document may have at most %d", name, st.Size(), api.MaxDocumentBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, api.MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > api.MaxDocumentBytes {
		return nil, fmt.Errorf("%s: file is over %d bytes, the limit of a rule-set document", name, api.MaxDocumentBytes)
	}
	rf := &ruleFile{name: name, data: data}
	rs, err := api.Decode(data)
	if err == nil {
		err = rs.Validate()
	}
	rf.rs = rs
	rf.errs = api.AsErrors(err)
	return rf, nil
}

// check returns an error listing every field problem, one line each.
func (c *cli) check(rf *ruleFile) error {
	if len(rf.errs) == 0 {
		return nil
	}
	for _, e := range rf.errs {
		fmt.Fprintf(c.stderr, "sluicectl: %s: %s\n", rf.name, e.Error())
	}
	return errReported
}

// validateResult is one file of `validate -o json`.
type validateResult struct {
	File     string           `json:"file"`
	Valid    bool             `json:"valid"`
	Checksum string           `json:"checksum,omitempty"`
	Errors   []api.FieldError `json:"errors"`
}

func cmdValidate(c *cli, _ *flagSet, args []string) error {
	var results []validateResult
	bad := false
	for _, name := range args {
		rf, err := readRuleFile(name)
		if err != nil {
			rf = &ruleFile{name: name, errs: api.Errors{{Message: strings.TrimPrefix(err.Error(), name+": ")}}}
		}
		r := validateResult{File: name, Valid: len(rf.errs) == 0, Errors: []api.FieldError(rf.errs)}
		if r.Errors == nil {
			r.Errors = []api.FieldError{}
		}
		if r.Valid {
			r.Checksum = rf.rs.Checksum()
		} else {
			bad = true
		}
		results = append(results, r)
		if c.output == "table" {
			if r.Valid {
				fmt.Fprintf(c.stdout, "%s: valid (namespace %s, %s%d routes, %d limits, %d breakers, %d degrades)\n", name,
					rf.rs.Namespace, serviceCounts(rf.rs), len(rf.rs.Routes), len(rf.rs.Limits), len(rf.rs.Breakers), len(rf.rs.Degrades))
			} else {
				for _, e := range rf.errs {
					fmt.Fprintf(c.stderr, "sluicectl: %s: %s\n", name, e.Error())
				}
			}
		}
	}
	if c.output != "table" {
		if err := c.print(map[string]any{"files": results}); err != nil {
			return err
		}
	}
	if bad {
		return errReported
	}
	return nil
}

// serviceCounts is what validate says of a kind: service document before
// its rule counts: "kind service, 3 resources, " (the distinct SDK resources
// its rules name); nothing for a gateway's.
func serviceCounts(rs *api.RuleSet) string {
	if !rs.IsService() {
		return ""
	}
	res := map[string]bool{}
	for _, l := range rs.Limits {
		for _, r := range l.Resources {
			res[r] = true
		}
	}
	for _, b := range rs.Breakers {
		for _, r := range b.Resources {
			res[r] = true
		}
	}
	for _, d := range rs.Degrades {
		for _, r := range d.Resources {
			res[r] = true
		}
	}
	return fmt.Sprintf("kind service, %d resources, ", len(res))
}

// summaryLine is one sentence of a diff, in the console's wording
// (web/src/features/changes/summary.ts), with the warnings about its rule.
type summaryLine struct {
	Kind     string        `json:"kind"`
	ID       string        `json:"id"`
	Op       string        `json:"op"`
	Text     string        `json:"text"`
	Warnings []api.Warning `json:"warnings"`
}

var singular = map[string]string{"routes": "route", "limits": "limit", "breakers": "breaker", "degrades": "degrade"}

// show renders a JSON value the way the console's show() does.
func show(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "(none)"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return showValue(v, raw)
}

func showValue(v any, raw json.RawMessage) string {
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return compactJSON(raw)
			}
			b, _ := json.Marshal(e)
			parts = append(parts, showValue(e, b))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		return compactJSON(raw)
	}
	return compactJSON(raw)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

type rec = map[string]json.RawMessage

func field(r rec, name string) json.RawMessage { return r[name] }

func orDefault(raw json.RawMessage, def string) string {
	if len(raw) == 0 {
		return def
	}
	return show(raw)
}

func str2(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func describeLimit(l rec) string {
	per := " per " + orDefault(l["period"], "1s")
	if str2(l["algorithm"]) == "concurrency" {
		per = " in flight"
	}
	key := ""
	var keys []string
	if json.Unmarshal(l["key"], &keys) == nil && len(keys) > 0 {
		key = ", key " + show(l["key"])
	}
	scope := ""
	if str2(l["scope"]) == "cluster" {
		scope = ", cluster-wide"
		if b := str2(l["bucket"]); b != "" {
			scope += " in bucket " + b
		}
	}
	return show(l["algorithm"]) + " " + show(l["rate"]) + per + key + scope + onResources(l)
}

// onResources names the SDK resources a kind: service rule guards, when it
// names any: ", on resources [db.InsertOrder]".
func onResources(r rec) string {
	var res []string
	if json.Unmarshal(r["resources"], &res) == nil && len(res) > 0 {
		return ", on resources " + show(r["resources"])
	}
	return ""
}

func describeAdded(kind string, r rec) string {
	switch kind {
	case "limits":
		return describeLimit(r)
	case "routes":
		var m rec
		_ = json.Unmarshal(r["match"], &m)
		switch {
		case m["path"] != nil:
			return "path " + show(m["path"])
		case m["pathPrefix"] != nil:
			return "prefix " + show(m["pathPrefix"])
		case m["pathRegex"] != nil:
			return "regex " + show(m["pathRegex"])
		}
		return "prefix /"
	case "degrades":
		s := show(r["mode"]) + " mode"
		if str2(r["mode"]) == "manual" {
			s += ", level " + orDefault(r["level"], "0")
		}
		return s + onResources(r)
	case "breakers":
		return "window " + show(r["window"]) + ", open for " + show(r["openFor"]) + onResources(r)
	}
	return ""
}

var warningPath = regexp.MustCompile(`^(routes|limits|breakers|degrades)\[([^\]]+)\]`)

// summarize turns a diff into the console's sentences, such as
// "limit orders-per-ip: rate 5 → 50 per 1s"; next is the rule set after the
// change (for a changed rate's period). Warnings not about a listed rule are
// returned as general.
func summarize(d *api.Diff, warnings []api.Warning, next *api.RuleSet) (lines []summaryLine, general []api.Warning) {
	lines = []summaryLine{}
	general = []api.Warning{}
	if d == nil {
		return lines, append(general, warnings...)
	}
	if d.Namespace != nil {
		lines = append(lines, summaryLine{Kind: "namespace", Op: "namespace", Text: "namespace " + show(d.Namespace.Old) + " → " + show(d.Namespace.New), Warnings: []api.Warning{}})
	}
	if d.Kind != nil {
		lines = append(lines, summaryLine{Kind: "kind", Op: "kind", Text: "kind " + show(d.Kind.Old) + " → " + show(d.Kind.New), Warnings: []api.Warning{}})
	}
	var limits map[string]api.Limit
	if next != nil {
		limits = map[string]api.Limit{}
		for _, l := range next.Limits {
			limits[l.ID] = l
		}
	}
	for _, r := range d.Rules {
		what := singular[r.Kind] + " " + r.ID
		if singular[r.Kind] == "" {
			what = r.Kind + " " + r.ID
		}
		var text string
		switch r.Op {
		case api.DiffAdded:
			var nr rec
			_ = json.Unmarshal(r.New, &nr)
			text = what + " added"
			if s := describeAdded(r.Kind, nr); s != "" {
				text += ": " + s
			}
		case api.DiffRemoved:
			text = what + " removed"
		default:
			parts := make([]string, 0, len(r.Fields))
			for _, f := range r.Fields {
				s := f.Path + " " + show(f.Old) + " → " + show(f.New)
				if l, ok := limits[r.ID]; ok && r.Kind == "limits" && f.Path == "rate" && l.Algorithm != "concurrency" {
					p := "1s"
					if l.Period != 0 {
						b, _ := json.Marshal(l.Period)
						p = show(b)
					}
					s += " per " + p
				}
				parts = append(parts, s)
			}
			text = what + ": " + strings.Join(parts, "; ")
		}
		lines = append(lines, summaryLine{Kind: r.Kind, ID: r.ID, Op: string(r.Op), Text: text, Warnings: []api.Warning{}})
	}
	for _, k := range d.Reordered {
		lines = append(lines, summaryLine{Kind: k, Op: "reordered", Text: k + " reordered (for routes, the first match wins)", Warnings: []api.Warning{}})
	}
	for _, w := range warnings {
		m := warningPath.FindStringSubmatch(w.Path)
		placed := false
		if m != nil {
			for i := range lines {
				if lines[i].Kind == m[1] && lines[i].ID == m[2] {
					lines[i].Warnings = append(lines[i].Warnings, w)
					placed = true
					break
				}
			}
		}
		if !placed {
			general = append(general, w)
		}
	}
	return lines, general
}

// printSummary writes the sentences, each rule's warnings indented below it.
func printSummary(w io.Writer, lines []summaryLine, general []api.Warning) {
	if len(lines) == 0 {
		fmt.Fprintln(w, "no differences")
	}
	for _, l := range lines {
		fmt.Fprintln(w, l.Text)
		for _, x := range l.Warnings {
			fmt.Fprintf(w, "  warning %s: %s\n", x.Code, x.Message)
		}
	}
	for _, x := range general {
		fmt.Fprintf(w, "warning %s: %s\n", x.Code, x.Message)
	}
}

// toYAML renders JSON as block-style YAML, keeping the keys' order.
func toYAML(data []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("converting to YAML: %w", err)
	}
	var clear func(*yaml.Node)
	clear = func(n *yaml.Node) {
		n.Style &^= yaml.FlowStyle
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
			n.Style &^= yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle
		}
		for _, c := range n.Content {
			clear(c)
		}
	}
	clear(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("converting to YAML: %w", err)
	}
	return b.Bytes(), nil
}

// print writes v in the -o format; table callers print their own text.
func (c *cli) print(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	data := buf.Bytes()
	if c.output == "yaml" {
		y, err := toYAML(data)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(y)
		return err
	}
	_, err := c.stdout.Write(data)
	return err
}
