package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Decode reads a rule document written in YAML or JSON (a document whose first
// non-blank byte, after an optional UTF-8 byte order mark, is '{' or '[' is
// read as JSON) strictly: unknown fields, duplicate keys, values of the wrong
// type, documents over MaxDocumentBytes, not UTF-8, nested deeper than
// MaxDocumentDepth or holding more than MaxDocumentNodes values, several YAML
// documents, YAML merge keys, aliases expanding past a fixed budget, NaN,
// infinities and out-of-range numbers are errors, and so are null (except
// for a JSON fallback body) and an empty string for an optional text field:
// a field is given a value or left out. The error is Errors, naming each
// problem's path and line; on error the rule set is nil. Decode does not
// validate: call Validate on the result. Its cost is linear in the
// document's size: a JSON document that encoding/json finds valid is read in
// one pass (see fastJSON), and so is a YAML document in the block style
// editors and yaml.Marshal write (see fastYAML).
func Decode(data []byte) (*RuleSet, error) {
	var rs RuleSet
	if err := Unmarshal(data, &rs); err != nil {
		return nil, err
	}
	return &rs, nil
}

// Unmarshal decodes a YAML or JSON document into v, a pointer to one of this
// package's types (or any struct using the same `json` tags), with the strict
// rules of Decode. As in every rule document, an optional field is either
// given a value or left out: null (except for a raw JSON value, such as a
// fallback body, where it means absent) and an empty string for an optional
// (omitempty) text field are errors, so that a document means one thing to
// Validate and to the JSON Schema.
func Unmarshal(data []byte, v any) error {
	return unmarshal(data, v, true)
}

func unmarshal(data []byte, v any, strict bool) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("api.Unmarshal needs a non-nil pointer")
	}
	root, err := parseTree(data)
	if err != nil {
		return err
	}
	if root.kind == kNull {
		return Errors{{Message: "document is empty (null)", Line: root.line}}
	}
	// Decode into a fresh value and copy it out only when everything
	// succeeded: a failed Unmarshal leaves v untouched.
	fresh := reflect.New(rv.Elem().Type())
	a := &assigner{strict: strict}
	a.assign(nil, root, fresh.Elem())
	if len(a.errs) > 0 {
		return a.errs
	}
	rv.Elem().Set(fresh.Elem())
	return nil
}

// UnmarshalJSON is Unmarshal for a body that must be JSON, such as an API
// request body. Unlike a rule document, it reads null and an empty optional
// string as absent.
func UnmarshalJSON(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return Errors{{Message: "body must be a JSON object"}}
	}
	return unmarshal(data, v, false)
}

type nodeKind uint8

const (
	kNull nodeKind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

func (k nodeKind) String() string {
	return [...]string{"null", "boolean", "number", "string", "list", "object"}[k]
}

// tree is a parsed document, independent of its syntax.
type tree struct {
	kind nodeKind
	str  string // string value, or the number's decimal literal
	b    bool
	keys []string
	vals []*tree // object values, in the order of keys; list items
	line int
}

func parseTree(data []byte) (*tree, error) {
	if len(data) > MaxDocumentBytes {
		return nil, Errors{{Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), MaxDocumentBytes)}}
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, Errors{{Message: fmt.Sprintf("document is not valid UTF-8 (byte %d)", off), Line: bytes.Count(data[:off], []byte("\n")) + 1}}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, Errors{{Message: "document is empty"}}
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return parseJSON(data)
	}
	return parseYAML(data)
}

// ---- JSON ----

type jsonParser struct {
	dec   *json.Decoder
	data  []byte
	nodes int
	// The decoder only moves forward, so line counts newlines from the
	// last offset it was asked about: linear in the document, not in the
	// number of values times its size.
	lineOff int
	lineNo  int
}

func parseJSON(data []byte) (*tree, error) {
	if json.Valid(data) {
		if t, ok := fastJSON(data); ok {
			return t, nil
		}
	}
	return parseJSONTokens(data)
}

// parseJSONTokens is the token-based parser: slower than fastJSON, but it
// names the path and line of every problem it finds.
func parseJSONTokens(data []byte) (*tree, error) {
	p := &jsonParser{dec: json.NewDecoder(bytes.NewReader(data)), data: data, lineNo: 1}
	p.dec.UseNumber()
	t, err := p.value("", 0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, Errors{{Message: "unexpected data after the JSON document", Line: p.line()}}
	}
	return t, nil
}

func (p *jsonParser) line() int {
	off := int(p.dec.InputOffset())
	off = min(off, len(p.data))
	if off < p.lineOff { // not expected; recount from the start
		p.lineOff, p.lineNo = 0, 1
	}
	p.lineNo += bytes.Count(p.data[p.lineOff:off], []byte("\n"))
	p.lineOff = off
	return p.lineNo
}

func (p *jsonParser) syntax(path string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "unexpected end of JSON document"
	}
	return Errors{{Path: path, Message: "invalid JSON: " + msg, Line: p.line()}}
}

func (p *jsonParser) value(path string, depth int) (*tree, error) {
	if depth > MaxDocumentDepth {
		return nil, Errors{{Path: path, Message: fmt.Sprintf("document is nested deeper than %d levels", MaxDocumentDepth), Line: p.line()}}
	}
	if p.nodes++; p.nodes > MaxDocumentNodes {
		return nil, Errors{{Path: path, Message: fmt.Sprintf("document has more than %d values", MaxDocumentNodes)}}
	}
	line := p.line()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(path, err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			t := &tree{kind: kObject, line: line}
			seen := map[string]bool{}
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.syntax(path, err)
				}
				k, _ := kt.(string)
				kp := joinKey(path, k)
				if seen[k] {
					return nil, Errors{{Path: kp, Message: "duplicate key", Line: p.line()}}
				}
				seen[k] = true
				val, err := p.value(kp, depth+1)
				if err != nil {
					return nil, err
				}
				t.keys = append(t.keys, k)
				t.vals = append(t.vals, val)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.syntax(path, err)
			}
			return t, nil
		case '[':
			t := &tree{kind: kArray, line: line}
			for i := 0; p.dec.More(); i++ {
				val, err := p.value(fmt.Sprintf("%s[%d]", path, i), depth+1)
				if err != nil {
					return nil, err
				}
				t.vals = append(t.vals, val)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.syntax(path, err)
			}
			return t, nil
		}
	case string:
		return &tree{kind: kString, str: v, line: line}, nil
	case json.Number:
		str, err := canonicalNumber(v.String())
		if err != nil {
			return nil, Errors{{Path: path, Message: err.Error(), Line: line}}
		}
		return &tree{kind: kNumber, str: str, line: line}, nil
	case bool:
		return &tree{kind: kBool, b: v, line: line}, nil
	case nil:
		return &tree{kind: kNull, line: line}, nil
	}
	return nil, Errors{{Path: path, Message: fmt.Sprintf("unexpected JSON token %v", tok), Line: line}}
}

// ---- YAML ----

// yamlConv turns a yaml.Node graph into a tree. It counts the values it
// produces, and separately those produced by expanding aliases, so that an
// alias bomb ("billion laughs") stops after a bounded amount of work.
type yamlConv struct {
	nodes   int
	aliased int // values produced inside alias expansions
	inAlias int // depth of alias expansion
}

// maxAliasValues bounds the values that alias expansion may produce. Rule
// documents have little use for aliases; this is generous for them and small
// enough to keep a hostile document's cost in the megabytes.
const maxAliasValues = 100_000

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlError turns the YAML library's error into a FieldError, keeping the
// line it names.
func yamlError(err error) Errors {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	return Errors{{Message: "invalid YAML: " + msg, Line: line}}
}

// parseYAML reads a YAML document: in one pass if it is in the subset that
// fastYAML reads, else with yaml.v3 (parseYAMLNodes), which also names the
// problem in a document it refuses.
func parseYAML(data []byte) (*tree, error) {
	if t, ok := fastYAML(data); ok {
		return t, nil
	}
	return parseYAMLNodes(data)
}

// parseYAMLNodes reads a YAML document with yaml.v3 and turns its nodes into
// a tree.
func parseYAMLNodes(data []byte) (t *tree, err error) {
	defer func() {
		// The YAML library should not panic, but a hostile document must never
		// take the process down with it.
		if r := recover(); r != nil {
			t, err = nil, Errors{{Message: fmt.Sprintf("invalid YAML: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{Message: "document is empty"}}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, Errors{{Message: "a rule document must hold exactly one YAML document", Line: extra.Line}}
	}
	c := &yamlConv{}
	return c.conv(nil, &doc, 0)
}

func (c *yamlConv) conv(path *fieldPath, n *yaml.Node, depth int) (*tree, error) {
	if depth > MaxDocumentDepth {
		return nil, Errors{{Path: path.String(), Message: fmt.Sprintf("document is nested deeper than %d levels", MaxDocumentDepth), Line: n.Line}}
	}
	if c.nodes++; c.nodes > MaxDocumentNodes {
		return nil, Errors{{Path: path.String(), Message: fmt.Sprintf("document has more than %d values", MaxDocumentNodes), Line: n.Line}}
	}
	if c.inAlias > 0 {
		if c.aliased++; c.aliased > maxAliasValues {
			return nil, Errors{{Path: path.String(), Message: fmt.Sprintf("YAML aliases expand to more than %d values (alias bomb?)", maxAliasValues), Line: n.Line}}
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &tree{kind: kNull, line: n.Line}, nil
		}
		return c.conv(path, n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, Errors{{Path: path.String(), Message: "unknown YAML alias", Line: n.Line}}
		}
		c.inAlias++
		t, err := c.conv(path, n.Alias, depth+1)
		c.inAlias--
		return t, err
	case yaml.MappingNode:
		t := &tree{kind: kObject, line: n.Line}
		var seen map[string]bool
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Tag == "!!merge" {
				return nil, Errors{{Path: path.String(), Message: "YAML merge keys (<<) are not supported", Line: kn.Line}}
			}
			if kn.Kind != yaml.ScalarNode {
				return nil, Errors{{Path: path.String(), Message: "object keys must be plain strings", Line: kn.Line}}
			}
			k := kn.Value
			if dupKey(t.keys, seen, k) {
				return nil, Errors{{Path: joinKey(path.String(), k), Message: "duplicate key", Line: kn.Line}}
			}
			if len(t.keys) == smallObject {
				seen = make(map[string]bool, 2*smallObject)
				for _, o := range t.keys {
					seen[o] = true
				}
			}
			if seen != nil {
				seen[k] = true
			}
			val, err := c.conv(&fieldPath{parent: path, key: k}, vn, depth+1)
			if err != nil {
				return nil, err
			}
			t.keys = append(t.keys, k)
			t.vals = append(t.vals, val)
		}
		return t, nil
	case yaml.SequenceNode:
		t := &tree{kind: kArray, line: n.Line}
		for i, item := range n.Content {
			val, err := c.conv(&fieldPath{parent: path, index: i, item: true}, item, depth+1)
			if err != nil {
				return nil, err
			}
			t.vals = append(t.vals, val)
		}
		return t, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return &tree{kind: kNull, line: n.Line}, nil
		case "!!bool":
			b, err := strconv.ParseBool(strings.ToLower(n.Value))
			if err != nil {
				return nil, Errors{{Path: path.String(), Message: fmt.Sprintf("invalid boolean %q", n.Value), Line: n.Line}}
			}
			return &tree{kind: kBool, b: b, line: n.Line}, nil
		case "!!int":
			str, err := yamlInt(n.Value)
			if err != nil {
				return nil, Errors{{Path: path.String(), Message: err.Error(), Line: n.Line}}
			}
			return &tree{kind: kNumber, str: str, line: n.Line}, nil
		case "!!float":
			str, err := canonicalNumber(n.Value)
			if err != nil {
				return nil, Errors{{Path: path.String(), Message: err.Error(), Line: n.Line}}
			}
			return &tree{kind: kNumber, str: str, line: n.Line}, nil
		default: // !!str, !!timestamp, !!binary and custom tags are read as text
			return &tree{kind: kString, str: n.Value, line: n.Line}, nil
		}
	}
	return nil, Errors{{Path: path.String(), Message: "unsupported YAML node", Line: n.Line}}
}

// yamlInt reads a YAML integer (decimal, or 0x, 0o, 0b prefixed, with _
// separators) as a decimal literal. A decimal with a leading zero is refused:
// YAML 1.1 reads 0777 as octal and YAML 1.2 as 777, and a rule must not mean
// two things.
func yamlInt(s string) (string, error) {
	plain := strings.ReplaceAll(s, "_", "")
	digits := strings.TrimLeft(plain, "+-")
	if len(digits) > 1 && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9' {
		return "", fmt.Errorf("integer %q has a leading zero; write it without (or with 0o for octal)", s)
	}
	v, err := strconv.ParseInt(plain, 0, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("integer %s is out of range", s)
		}
		return "", fmt.Errorf("invalid integer %q", s)
	}
	return strconv.FormatInt(v, 10), nil
}

// canonicalNumber checks a decimal number literal (JSON, or a YAML float) and
// returns one spelling for its value, so that the same number written in
// either syntax reads the same: integers that fit in int64 as plain decimals,
// everything else as encoding/json writes a float64. NaN, infinities and
// numbers beyond float64 are errors.
func canonicalNumber(s string) (string, error) {
	if !strings.ContainsAny(s, ".eE") {
		plain := strings.TrimPrefix(s, "+")
		if v, err := strconv.ParseInt(plain, 10, 64); err == nil {
			return strconv.FormatInt(v, 10), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		if errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("number %s is out of range", s)
		}
		return "", fmt.Errorf("invalid number %q", s)
	}
	b, _ := json.Marshal(f)
	return string(b), nil
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ---- assignment into Go values ----

var (
	durationType = reflect.TypeFor[Duration]()
	rawJSONType  = reflect.TypeFor[RawJSON]()
	fieldCache   sync.Map // reflect.Type → map[string]jsonField
)

// jsonField is a struct field as its json tag names it.
type jsonField struct {
	index     int
	omitempty bool
}

func jsonFields(t reflect.Type) map[string]jsonField {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]jsonField)
	}
	m := map[string]jsonField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = jsonField{index: i, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	fieldCache.Store(t, m)
	return m
}

// assigner assigns a tree to Go values, collecting errors. strict refuses
// null and empty optional strings (see Unmarshal).
type assigner struct {
	errs   Errors
	strict bool
}

// fieldPath is the path of a value being assigned, kept as a chain of
// steps and written out only for an error: formatting every value's path
// would cost more than decoding it.
type fieldPath struct {
	parent *fieldPath
	key    string // object key, unless item
	index  int    // list index, when item
	item   bool
}

func (p *fieldPath) String() string {
	if p == nil {
		return ""
	}
	if p.item {
		return p.parent.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return joinKey(p.parent.String(), p.key)
}

func (a *assigner) assign(path *fieldPath, t *tree, v reflect.Value) {
	errs := &a.errs
	fail := func(format string, args ...any) {
		*errs = append(*errs, FieldError{Path: path.String(), Message: sprintf(format, args...), Line: t.line})
	}
	if v.Type() == rawJSONType {
		if t.kind == kNull {
			v.SetBytes(nil)
			return
		}
		var buf bytes.Buffer
		writeJSON(&buf, t)
		v.SetBytes(buf.Bytes())
		return
	}
	if t.kind == kNull {
		if a.strict {
			fail("null is not a value here; leave the field out or give it a value")
			return
		}
		v.SetZero()
		return
	}
	if v.Type() == durationType {
		if t.kind != kString {
			fail("expected a duration string such as \"1s\", got %s", describe(t))
			return
		}
		d, err := ParseDuration(t.str)
		if err != nil {
			fail("%v", err)
			return
		}
		v.SetInt(int64(d))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		a.assign(path, t, nv.Elem())
		v.Set(nv)
	case reflect.Struct:
		if t.kind != kObject {
			fail("expected an object, got %s", describe(t))
			return
		}
		fields := jsonFields(v.Type())
		for i, k := range t.keys {
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, FieldError{Path: joinKey(path.String(), k), Message: "unknown field" + suggest(k, fields), Line: t.vals[i].line})
				continue
			}
			fv := v.Field(f.index)
			if a.strict && f.omitempty && fv.Kind() == reflect.String && t.vals[i].kind == kString && t.vals[i].str == "" {
				*errs = append(*errs, FieldError{Path: joinKey(path.String(), k), Message: "is empty; leave the field out or give it a value", Line: t.vals[i].line})
				continue
			}
			a.assign(&fieldPath{parent: path, key: k}, t.vals[i], fv)
		}
	case reflect.Slice:
		if t.kind != kArray {
			fail("expected a list, got %s", describe(t))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(t.vals), len(t.vals))
		for i, item := range t.vals {
			a.assign(&fieldPath{parent: path, index: i, item: true}, item, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if t.kind != kObject {
			fail("expected an object, got %s", describe(t))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(t.keys))
		for i, k := range t.keys {
			ev := reflect.New(v.Type().Elem()).Elem()
			a.assign(&fieldPath{parent: path, key: k}, t.vals[i], ev)
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
	case reflect.String:
		if t.kind != kString {
			fail("expected a string, got %s", describe(t))
			return
		}
		v.SetString(t.str)
	case reflect.Bool:
		if t.kind != kBool {
			fail("expected true or false, got %s", describe(t))
			return
		}
		v.SetBool(t.b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if t.kind != kNumber {
			fail("expected a whole number, got %s", describe(t))
			return
		}
		n, err := strconv.ParseInt(t.str, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(t.str, 64)
			switch {
			case ferr == nil && f != math.Trunc(f):
				fail("expected a whole number, got %s", t.str)
				return
			case ferr != nil || math.Abs(f) >= 1<<53:
				fail("number %s is out of range", t.str)
				return
			}
			n = int64(f)
		}
		if v.OverflowInt(n) {
			fail("number %s is out of range", t.str)
			return
		}
		v.SetInt(n)
	case reflect.Float64:
		if t.kind != kNumber {
			fail("expected a number, got %s", describe(t))
			return
		}
		f, err := strconv.ParseFloat(t.str, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			fail("invalid number %s", t.str)
			return
		}
		v.SetFloat(f)
	default:
		fail("cannot decode into %s", v.Type())
	}
}

func describe(t *tree) string {
	switch t.kind {
	case kString:
		s := t.str
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return fmt.Sprintf("string %q", s)
	case kNumber:
		return "number " + t.str
	case kBool:
		return fmt.Sprintf("boolean %v", t.b)
	}
	return t.kind.String()
}

// suggest names the known field closest to an unknown one, to catch typos
// such as "pathprefix" or "burts".
func suggest(k string, fields map[string]jsonField) string {
	best, bestD := "", 3
	for name := range fields {
		if d := editDistance(strings.ToLower(k), strings.ToLower(name)); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func writeJSON(buf *bytes.Buffer, t *tree) {
	switch t.kind {
	case kNull:
		buf.WriteString("null")
	case kBool:
		buf.WriteString(strconv.FormatBool(t.b))
	case kNumber:
		buf.WriteString(t.str)
	case kString:
		b, _ := json.Marshal(t.str)
		buf.Write(b)
	case kArray:
		buf.WriteByte('[')
		for i, v := range t.vals {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(buf, v)
		}
		buf.WriteByte(']')
	case kObject:
		// Keys are sorted so that the same object written in YAML or JSON, in
		// any order, has one encoding.
		idx := make([]int, len(t.keys))
		for i := range idx {
			idx[i] = i
		}
		sortByKey(idx, t.keys)
		buf.WriteByte('{')
		for n, i := range idx {
			if n > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(t.keys[i])
			buf.Write(b)
			buf.WriteByte(':')
			writeJSON(buf, t.vals[i])
		}
		buf.WriteByte('}')
	}
}
