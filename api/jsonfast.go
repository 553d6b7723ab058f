package api

import (
	"encoding/json"
	"unicode/utf8"
)

// fastJSON builds the tree of a document that json.Valid has accepted, in
// one pass over its bytes. It applies the same limits as the token-based
// parser (depth, value count, duplicate keys, number ranges) but produces no
// messages: on any problem it reports false and parseJSON runs the
// token-based parser, which finds the same problem and names its path and
// line. Valid documents, the common case, cost a single linear scan and one
// allocation per value instead of encoding/json's per-token machinery.
func fastJSON(data []byte) (*tree, bool) {
	p := &fastParser{data: data, line: 1}
	t, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.ws()
	return t, p.pos == len(p.data)
}

type fastParser struct {
	data  []byte
	pos   int
	line  int
	nodes int
	slab  []tree // values are allocated in blocks
}

func (p *fastParser) node(t tree) *tree {
	if len(p.slab) == 0 {
		p.slab = make([]tree, 256)
	}
	n := &p.slab[0]
	*n = t
	p.slab = p.slab[1:]
	return n
}

func (p *fastParser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\r':
		case '\n':
			p.line++
		default:
			return
		}
		p.pos++
	}
}

// dupKey reports whether k is already among keys. Objects in rule documents
// have a handful of keys; a map (seen) takes over for large ones so that an
// object of n keys costs O(n), not O(n²).
func dupKey(keys []string, seen map[string]bool, k string) bool {
	if seen != nil {
		return seen[k]
	}
	for _, o := range keys {
		if o == k {
			return true
		}
	}
	return false
}

// smallObject is the key count up to which dupKey scans the keys.
const smallObject = 16

func (p *fastParser) value(depth int) (*tree, bool) {
	if depth > MaxDocumentDepth {
		return nil, false
	}
	if p.nodes++; p.nodes > MaxDocumentNodes {
		return nil, false
	}
	p.ws()
	if p.pos >= len(p.data) {
		return nil, false
	}
	line := p.line
	switch c := p.data[p.pos]; c {
	case '{':
		p.pos++
		t := p.node(tree{kind: kObject, line: line})
		var seen map[string]bool
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return t, true
		}
		for {
			p.ws()
			k, ok := p.str()
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
			p.ws()
			p.pos++ // ':'
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			t.keys = append(t.keys, k)
			t.vals = append(t.vals, v)
			p.ws()
			if p.pos >= len(p.data) {
				return nil, false
			}
			c := p.data[p.pos]
			p.pos++
			if c != ',' {
				return t, c == '}'
			}
		}
	case '[':
		p.pos++
		t := p.node(tree{kind: kArray, line: line})
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return t, true
		}
		for {
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			t.vals = append(t.vals, v)
			p.ws()
			if p.pos >= len(p.data) {
				return nil, false
			}
			c := p.data[p.pos]
			p.pos++
			if c != ',' {
				return t, c == ']'
			}
		}
	case '"':
		s, ok := p.str()
		return p.node(tree{kind: kString, str: s, line: line}), ok
	case 't':
		p.pos += len("true")
		return p.node(tree{kind: kBool, b: true, line: line}), true
	case 'f':
		p.pos += len("false")
		return p.node(tree{kind: kBool, line: line}), true
	case 'n':
		p.pos += len("null")
		return p.node(tree{kind: kNull, line: line}), true
	default:
		start := p.pos
		for p.pos < len(p.data) && numberByte(p.data[p.pos]) {
			p.pos++
		}
		str, err := canonicalNumber(string(p.data[start:p.pos]))
		if err != nil {
			return nil, false
		}
		return p.node(tree{kind: kNumber, str: str, line: line}), true
	}
}

// str reads the string at p.pos (its opening quote). Strings without escapes
// are copied as they are; the rare one with escapes (or bytes that are not
// UTF-8, which encoding/json replaces) is decoded by encoding/json, so that
// it means exactly what it means there.
func (p *fastParser) str() (string, bool) {
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		return "", false
	}
	start := p.pos + 1
	escaped, high := false, false
	for i := start; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '\\':
			escaped = true
			i++ // skip the escaped byte (a quote or a backslash among them)
		case c >= utf8.RuneSelf:
			high = true
		case c == '"':
			p.pos = i + 1
			if !escaped && (!high || utf8.Valid(p.data[start:i])) {
				return string(p.data[start:i]), true
			}
			var s string
			if err := json.Unmarshal(p.data[start-1:i+1], &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
