package api

import (
	"strconv"
	"unicode/utf8"
)

// fastYAML builds the tree of a YAML document in one pass over its lines,
// for the subset of YAML that rule documents are written in: block mappings
// and block sequences (indented or not under their key), plain scalars,
// single- and double-quoted scalars without escapes (a double-quoted one
// without backslashes) and flow collections ("[GET, POST]", "{url: "x"}"),
// each on one line, and comments. It reads that subset exactly as yaml.v3
// and yamlConv do, lines included, but produces no messages: on anything
// else (multi-line scalars or flow collections, anchors, aliases, tags, block
// scalars, null, tabs, carriage returns, control characters, line
// separators, characters beyond U+FFFF, several documents, duplicate keys, a document too deep or too large, a
// number it does not read with certainty) it reports false and parseYAML
// runs yaml.v3, which accepts or refuses the document and names the problem.
// TestFastYAMLRandomDocuments and FuzzFastYAML check that whatever it
// accepts, yaml.v3 reads alike.
func fastYAML(data []byte) (*tree, bool) {
	for i := 0; i < len(data); i++ {
		if c := data[i]; c >= 0x20 && c <= 0x7e || c == '\n' {
			continue
		}
		// yaml.v3's printable characters beyond ASCII, without its line
		// breaks (U+0085, U+2028, U+2029) and the byte order mark; and
		// without characters beyond U+FFFF, which it refuses. A byte that
		// is not UTF-8 decodes as one byte.
		r, size := utf8.DecodeRune(data[i:])
		if size == 1 || !(r >= 0xa0 && r <= 0xd7ff && r != 0x2028 && r != 0x2029 || r >= 0xe000 && r <= 0xfffd && r != 0xfeff) {
			return nil, false
		}
		i += size - 1
	}
	p := &yamlFast{data: data, strs: map[string]string{}}
	p.advance()
	if p.eof {
		return nil, false
	}
	t, ok := p.node(p.s, p.ind, 0)
	if !ok || !p.eof {
		return nil, false
	}
	return t, true
}

// yamlFast is fastYAML's state: the current content line (not blank, not a
// comment) and the values made so far.
type yamlFast struct {
	data []byte
	next int  // offset of the line after the current one
	line int  // the current line's number, from 1
	ls   int  // offset of the current line's start
	s, e int  // its content: first non-space byte, end without trailing spaces
	ind  int  // its indentation, s - ls
	eof  bool // no content line is left
	n    int  // values made
	slab []tree
	strs map[string]string // short strings, made once
}

// advance moves to the next content line.
func (p *yamlFast) advance() {
	for p.next < len(p.data) {
		ls := p.next
		end := ls
		for end < len(p.data) && p.data[end] != '\n' {
			end++
		}
		p.line++
		p.next = end + 1
		s := ls
		for s < end && p.data[s] == ' ' {
			s++
		}
		if s == end || p.data[s] == '#' {
			continue
		}
		e := end
		for p.data[e-1] == ' ' {
			e--
		}
		p.ls, p.s, p.e, p.ind = ls, s, e, s-ls
		return
	}
	p.eof = true
}

func (p *yamlFast) make(t tree) (*tree, bool) {
	// yamlConv counts the document node too, and every value.
	if p.n++; p.n+1 > MaxDocumentNodes {
		return nil, false
	}
	if len(p.slab) == 0 {
		p.slab = make([]tree, 256)
	}
	n := &p.slab[0]
	*n = t
	p.slab = p.slab[1:]
	return n, true
}

// str returns data[a:b] as a string, sharing the copies of short ones: keys
// and values such as "id", "GET" or "5s" recur throughout a document.
func (p *yamlFast) str(a, b int) string {
	if b-a > 24 {
		return string(p.data[a:b])
	}
	if s, ok := p.strs[string(p.data[a:b])]; ok {
		return s
	}
	s := string(p.data[a:b])
	p.strs[s] = s
	return s
}

// seqEntry reports whether a block sequence entry ("- " or a lone "-")
// starts at offset s of the current line.
func (p *yamlFast) seqEntry(s int) bool {
	return p.data[s] == '-' && (s+1 == p.e || p.data[s+1] == ' ')
}

// node reads the mapping or sequence starting at offset s, column col, of
// the current line.
func (p *yamlFast) node(s, col, depth int) (*tree, bool) {
	if depth > MaxDocumentDepth {
		return nil, false
	}
	if p.seqEntry(s) {
		return p.sequence(s, col, depth)
	}
	if _, _, ok := p.key(s); ok {
		return p.mapping(s, col, depth)
	}
	return nil, false // a scalar on a line of its own, or not in the subset
}

// key reads the key of a mapping entry at offset s: a plain key of letters,
// digits and "_./-" or a quoted one, followed by ':' and a space or the end
// of the line. It returns the key and the offset after the ':'.
func (p *yamlFast) key(s int) (string, int, bool) {
	d := p.data
	var k string
	i := s
	switch c := d[s]; {
	case c == '"' || c == '\'':
		var ok bool
		if k, i, ok = p.quoted(s); !ok {
			return "", 0, false
		}
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/':
		for i < p.e && keyByte(d[i]) {
			i++
		}
		k = p.str(s, i)
	default:
		return "", 0, false
	}
	// yaml.v3 looks for the ':' of a key at most 1024 bytes on.
	if i-s > 1000 || i >= p.e || d[i] != ':' || (i+1 < p.e && d[i+1] != ' ') {
		return "", 0, false
	}
	return k, i + 1, true
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-'
}

// mapping reads a block mapping whose first key is at offset s, column col.
func (p *yamlFast) mapping(s, col, depth int) (*tree, bool) {
	t, ok := p.make(tree{kind: kObject, line: p.line})
	if !ok {
		return nil, false
	}
	var seen map[string]bool
	for {
		k, v, ok := p.key(s)
		if !ok || dupKey(t.keys, seen, k) {
			return nil, false
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
		v = p.skipSpaces(v)
		var val *tree
		if p.lineEnds(v) {
			// The value is on the next lines: more indented, or a sequence
			// at the key's own indentation. Anything else makes it null.
			p.advance()
			if p.eof || !(p.ind > col || p.ind == col && p.seqEntry(p.s)) {
				return nil, false
			}
			val, ok = p.node(p.s, p.ind, depth+1)
		} else {
			val, ok = p.scalar(v, depth+1)
			p.advance()
		}
		if !ok {
			return nil, false
		}
		t.keys = append(t.keys, k)
		t.vals = append(t.vals, val)
		if p.eof || p.ind < col {
			return t, true
		}
		if p.ind > col || p.seqEntry(p.s) {
			return nil, false
		}
		s = p.s
	}
}

// sequence reads a block sequence whose first "-" is at offset s, column
// col.
func (p *yamlFast) sequence(s, col, depth int) (*tree, bool) {
	t, ok := p.make(tree{kind: kArray, line: p.line})
	if !ok {
		return nil, false
	}
	for {
		v := p.skipSpaces(s + 1)
		var val *tree
		switch {
		case p.lineEnds(v): // a lone "-": the item is on the next lines
			p.advance()
			if p.eof || p.ind <= col {
				return nil, false
			}
			val, ok = p.node(p.s, p.ind, depth+1)
		case p.seqEntry(v):
			return nil, false
		default:
			if _, _, isKey := p.key(v); isKey {
				if depth+1 > MaxDocumentDepth {
					return nil, false
				}
				val, ok = p.mapping(v, v-p.ls, depth+1)
			} else {
				val, ok = p.scalar(v, depth+1)
				p.advance()
			}
		}
		if !ok {
			return nil, false
		}
		t.vals = append(t.vals, val)
		if p.eof || p.ind < col {
			return t, true
		}
		if p.ind > col {
			return nil, false
		}
		if !p.seqEntry(p.s) {
			// A key at the same indentation: this was a sequence
			// without indentation under its key, and the mapping goes on.
			return t, true
		}
		s = p.s
	}
}

// quoted reads the single- or double-quoted scalar at offset s, which must
// end on the current line. A double-quoted one must hold no backslash.
func (p *yamlFast) quoted(s int) (string, int, bool) {
	d := p.data
	q := d[s]
	escaped := false
	for i := s + 1; i < p.e; i++ {
		switch {
		case d[i] == '\\' && q == '"':
			return "", 0, false
		case d[i] != q:
		case q == '\'' && i+1 < p.e && d[i+1] == '\'':
			escaped = true
			i++
		default:
			if !escaped {
				return p.str(s+1, i), i + 1, true
			}
			b := make([]byte, 0, i-s-1)
			for j := s + 1; j < i; j++ {
				b = append(b, d[j])
				if d[j] == '\'' {
					j++
				}
			}
			return string(b), i + 1, true
		}
	}
	return "", 0, false
}

// scalar reads the value at offset s of a block mapping or sequence entry,
// which must fill the rest of the current line: a scalar or a flow
// collection. It resolves scalars as yaml.v3 and yamlConv would.
func (p *yamlFast) scalar(s, depth int) (*tree, bool) {
	if depth > MaxDocumentDepth {
		return nil, false
	}
	d := p.data
	if p.seqEntry(s) {
		return nil, false // "key: - x" is an error in YAML
	}
	switch d[s] {
	case '"', '\'':
		str, end, ok := p.quoted(s)
		if !ok || !p.lineEnds(end) {
			return nil, false
		}
		return p.make(tree{kind: kString, str: str, line: p.line})
	case '[', '{':
		t, end, ok := p.flow(s, depth)
		if !ok || !p.lineEnds(end) {
			return nil, false
		}
		return t, true
	}
	// A plain scalar: up to a comment (" #"), without ": " or a ':' at its
	// end.
	e := p.e
scan:
	for i := s; i < p.e; i++ {
		switch d[i] {
		case ':':
			if i+1 == p.e || d[i+1] == ' ' {
				return nil, false
			}
		case '#':
			if d[i-1] == ' ' {
				e = i
				break scan
			}
		}
	}
	for e > s && d[e-1] == ' ' {
		e--
	}
	if e == s {
		return nil, false
	}
	return p.plain(s, e)
}

// lineEnds reports whether only spaces and a comment follow offset i on the
// current line.
func (p *yamlFast) lineEnds(i int) bool {
	i = p.skipSpaces(i)
	return i == p.e || p.data[i] == '#' && p.data[i-1] == ' '
}

// flow reads the flow collection ("[a, b]", "{k: v}") at offset s, which
// must end on the current line, and returns the offset after it. Inside, it
// reads nested flow collections, quoted scalars and plain scalars without
// flow indicators (",[]{}?"), quotes, '#' or ':'; it refuses empty entries, a trailing
// comma, a key without a value and an entry of a sequence written "k: v".
func (p *yamlFast) flow(s, depth int) (*tree, int, bool) {
	if depth > MaxDocumentDepth {
		return nil, 0, false
	}
	d := p.data
	open := d[s]
	kind, closing := kArray, byte(']')
	if open == '{' {
		kind, closing = kObject, '}'
	}
	t, ok := p.make(tree{kind: kind, line: p.line})
	if !ok {
		return nil, 0, false
	}
	i := p.skipSpaces(s + 1)
	if i < p.e && d[i] == closing {
		return t, i + 1, true
	}
	var seen map[string]bool
	for {
		if i >= p.e {
			return nil, 0, false
		}
		if kind == kObject {
			k, v, ok := p.key(i)
			if !ok || v >= p.e || d[v] != ' ' || dupKey(t.keys, seen, k) {
				return nil, 0, false
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
			t.keys = append(t.keys, k)
			i = p.skipSpaces(v)
		}
		var val *tree
		val, i, ok = p.flowValue(i, depth+1)
		if !ok {
			return nil, 0, false
		}
		t.vals = append(t.vals, val)
		i = p.skipSpaces(i)
		if i >= p.e {
			return nil, 0, false
		}
		switch d[i] {
		case closing:
			return t, i + 1, true
		case ',':
			i = p.skipSpaces(i + 1)
			if i < p.e && (d[i] == ']' || d[i] == '}' || d[i] == ',') {
				return nil, 0, false
			}
		default:
			return nil, 0, false
		}
	}
}

// flowValue reads one value inside a flow collection at offset i.
func (p *yamlFast) flowValue(i, depth int) (*tree, int, bool) {
	if i >= p.e {
		return nil, 0, false
	}
	d := p.data
	switch d[i] {
	case '[', '{':
		return p.flow(i, depth)
	case '"', '\'':
		if depth > MaxDocumentDepth {
			return nil, 0, false
		}
		str, end, ok := p.quoted(i)
		if !ok {
			return nil, 0, false
		}
		t, ok := p.make(tree{kind: kString, str: str, line: p.line})
		return t, end, ok
	}
	if depth > MaxDocumentDepth {
		return nil, 0, false
	}
	end := i
	for end < p.e && !flowStop(d[end]) {
		end++
	}
	if end < p.e && (d[end] == ':' || d[end] == '?' || d[end] == '#' || d[end] == '"' || d[end] == '\'') {
		return nil, 0, false
	}
	e := end
	for e > i && d[e-1] == ' ' {
		e--
	}
	if e == i {
		return nil, 0, false
	}
	t, ok := p.plain(i, e)
	return t, end, ok
}

func flowStop(c byte) bool {
	switch c {
	case ',', '[', ']', '{', '}', '?', ':', '#', '"', '\'':
		return true
	}
	return false
}

func (p *yamlFast) skipSpaces(i int) int {
	for i < p.e && p.data[i] == ' ' {
		i++
	}
	return i
}

// plain resolves the plain scalar data[s:e] as yaml.v3 and yamlConv would.
func (p *yamlFast) plain(s, e int) (*tree, bool) {
	v := p.data[s:e]
	if v[0] == '-' && (len(v) == 1 || v[1] == ' ') {
		return nil, false // a block sequence entry, not a scalar
	}
	switch c := v[0]; {
	case c >= '0' && c <= '9' || c == '-':
		return p.number(s, e)
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '/' || c == '^' || c == '$':
		switch string(v) {
		case "true", "True", "TRUE":
			return p.make(tree{kind: kBool, b: true, line: p.line})
		case "false", "False", "FALSE":
			return p.make(tree{kind: kBool, line: p.line})
		case "null", "Null", "NULL":
			return nil, false
		}
		return p.make(tree{kind: kString, str: p.str(s, e), line: p.line})
	}
	return nil, false // an indicator, '~', '.', '+' and the rest
}

// number resolves a plain scalar data[s:e] starting with a digit or '-': a
// decimal integer, a decimal fraction, or text that cannot be a number (such
// as "5s"). Every other spelling (hex, octal, exponents, separators, leading
// zeros) is left to yaml.v3.
func (p *yamlFast) number(s, e int) (*tree, bool) {
	v := p.data[s:e]
	i := 0
	if v[0] == '-' {
		i++
		if len(v) == 1 || v[1] < '0' || v[1] > '9' {
			return nil, false // "-.inf" and the like, "-x"
		}
	}
	digits := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	intPart := v[digits:i]
	canonical := len(intPart) > 0 && (intPart[0] != '0' || len(intPart) == 1)
	switch {
	case i == len(v) && canonical:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, false
		}
		return p.make(tree{kind: kNumber, str: strconv.FormatInt(n, 10), line: p.line})
	case i < len(v) && v[i] == '.' && canonical:
		j := i + 1
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		if j == len(v) && j > i+1 {
			str, err := canonicalNumber(string(v))
			if err != nil {
				return nil, false
			}
			return p.make(tree{kind: kNumber, str: str, line: p.line})
		}
	}
	// Text if some byte rules out every number yaml.v3 reads (integers in
	// any base with '_' separators, floats with exponents).
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == 'x' || c == 'X' || c == 'o' || c == 'O' || c == '_' || c == '.' || c == '+' || c == '-') {
			return p.make(tree{kind: kString, str: p.str(s, e), line: p.line})
		}
	}
	return nil, false
}
