package replay

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// fastJSON reads a JSON line of the usual shape into j without reflection:
// one object whose ts is a number or a string, whose ip, method, host and
// path are strings, whose headers is an object of strings or arrays of
// strings, and whose other fields hold any JSON value (skipped). It reports
// false for anything else — invalid JSON, a null or another type where
// those fields are, a key that matches one of them only ignoring case (as
// encoding/json would match it) — and the caller then decodes the line with
// encoding/json, which reads it (or words its error) exactly. A replay is
// mostly this function, so it is worth the few lines.
func fastJSON(line []byte, j *jsonLine) bool {
	p := jsonScanner{b: line}
	p.ws()
	if !p.eat('{') {
		return false
	}
	p.ws()
	if p.eat('}') {
		return p.end()
	}
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if !p.eat(':') {
			return false
		}
		p.ws()
		switch key {
		case "ts":
			start := p.i
			if p.peek() == '"' {
				if _, ok := p.str(); !ok {
					return false
				}
			} else if !p.number() {
				return false
			}
			j.TS = line[start:p.i]
		case "ip", "method", "host", "path":
			s, ok := p.str()
			if !ok {
				return false
			}
			switch key {
			case "ip":
				j.IP = s
			case "method":
				j.Method = s
			case "host":
				j.Host = s
			default:
				j.Path = s
			}
		case "headers":
			if !p.headers(j) {
				return false
			}
		default:
			for _, k := range [...]string{"ts", "ip", "method", "host", "path", "headers"} {
				if strings.EqualFold(key, k) {
					return false
				}
			}
			if !p.skip(0) {
				return false
			}
		}
		p.ws()
		if p.eat('}') {
			return p.end()
		}
		if !p.eat(',') {
			return false
		}
	}
}

// jsonScanner reads JSON from b at i.
type jsonScanner struct {
	b []byte
	i int
}

func (p *jsonScanner) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScanner) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *jsonScanner) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space follows.
func (p *jsonScanner) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// number reads a JSON number.
func (p *jsonScanner) number() bool {
	start := p.i
	p.eat('-')
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if n := digits(); n == 0 || (n > 1 && p.b[p.i-n] == '0') {
		return false
	}
	if p.eat('.') && digits() == 0 {
		return false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return p.i > start
}

// str reads a JSON string and returns it unescaped (a copy).
func (p *jsonScanner) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// escaped reads the rest of a string that has an escape, from start (just
// after its opening quote).
func (p *jsonScanner) escaped(start int) (string, bool) {
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair, or (as encoding/json reads it) U+FFFD.
				r2 := rune(-1)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					var ok2 bool
					if r2, ok2 = p.hex4(); !ok2 {
						return "", false
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						p.i, r = save, utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *jsonScanner) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		v := unhex(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	p.i += 4
	return r, true
}

// headers reads the headers object into j.Headers.
func (p *jsonScanner) headers(j *jsonLine) bool {
	if !p.eat('{') {
		return false
	}
	j.Headers = map[string]headerValues{}
	p.ws()
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		name, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if !p.eat(':') {
			return false
		}
		p.ws()
		var vals headerValues
		if p.peek() == '[' {
			p.i++
			p.ws()
			if !p.eat(']') {
				for {
					p.ws()
					s, ok := p.str()
					if !ok {
						return false
					}
					vals = append(vals, s)
					p.ws()
					if p.eat(']') {
						break
					}
					if !p.eat(',') {
						return false
					}
				}
			}
			if vals == nil {
				vals = headerValues{}
			}
		} else {
			s, ok := p.str()
			if !ok {
				return false
			}
			vals = headerValues{s}
		}
		j.Headers[name] = vals
		p.ws()
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// skip skips one JSON value of any type (depth: of the enclosing arrays and
// objects, bounded).
func (p *jsonScanner) skip(depth int) bool {
	if depth > 64 {
		return false
	}
	switch c := p.peek(); {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '[':
		p.i++
		p.ws()
		if p.eat(']') {
			return true
		}
		for {
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat(']') {
				return true
			}
			if !p.eat(',') {
				return false
			}
		}
	case c == '{':
		p.i++
		p.ws()
		if p.eat('}') {
			return true
		}
		for {
			p.ws()
			if _, ok := p.str(); !ok {
				return false
			}
			p.ws()
			if !p.eat(':') {
				return false
			}
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat('}') {
				return true
			}
			if !p.eat(',') {
				return false
			}
		}
	}
	return false
}

func (p *jsonScanner) lit(s string) bool {
	if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+len(s))]), s) {
		p.i += len(s)
		return true
	}
	return false
}
