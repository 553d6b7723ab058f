package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawUpstream is an upstream that records the head of every request exactly
// as it arrives on the socket, by path, and answers 200.
type rawUpstream struct {
	ln   net.Listener
	mu   sync.Mutex
	seen map[string][]byte // request path → raw head
}

func newRawUpstream(tb testing.TB) *rawUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &rawUpstream{ln: ln, seen: map[string][]byte{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return u
}

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var head bytes.Buffer
		for {
			line, err := br.ReadBytes('\n')
			head.Write(line)
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		reqLine, _, _ := bytes.Cut(head.Bytes(), []byte("\r\n"))
		fields := strings.Fields(string(reqLine))
		if len(fields) < 2 {
			return
		}
		path, _, _ := strings.Cut(fields[1], "?")
		u.mu.Lock()
		u.seen[path] = bytes.Clone(head.Bytes())
		u.mu.Unlock()
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

func (u *rawUpstream) head(path string) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[path]
}

// sendRaw writes one raw HTTP/1.1 request to addr and returns the status and
// body of the answer.
func sendRaw(tb testing.TB, addr, req string) (int, string) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatalf("reading the answer to %q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// reading is what one parser makes of a request's key part: its values
// (more than one means the parser saw it repeated).
type reading struct {
	Values []string `json:"values"`
}

// value is the single value a reading keys on, "" for missing or empty (the
// gateway keys both alike), and ok false when the reading has several.
func (r reading) value() (string, bool) {
	switch len(r.Values) {
	case 0:
		return "", true
	case 1:
		return r.Values[0], true
	}
	return "", false
}

// goReading parses a raw request head as a Go upstream would: net/http's
// request parser, then url.ParseQuery, Header and Cookies.
func goReading(tb testing.TB, head []byte, kind, name string) reading {
	tb.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		tb.Fatalf("Go cannot parse the forwarded request: %v\n%s", err, head)
	}
	var rd reading
	switch kind {
	case "query":
		q, _ := url.ParseQuery(r.URL.RawQuery)
		rd.Values = q[name]
	case "header":
		rd.Values = r.Header.Values(name)
	case "cookie":
		for _, c := range r.Cookies() {
			if c.Name == name {
				rd.Values = append(rd.Values, c.Value)
			}
		}
	}
	return rd
}

// pythonScript reads a JSON list of {head, kind, name} and prints, for each,
// what a Python upstream reads: urllib.parse.parse_qs for query parameters,
// the WSGI environ variable (CGI name: upper case, "-" as "_"; repeated
// lines joined with ",", as wsgiref and gunicorn do) for headers, and
// http.cookies.SimpleCookie for cookies.
const pythonScript = `
import json, sys, urllib.parse, http.cookies
out = []
for c in json.load(sys.stdin):
    head = c["head"].encode("latin-1").decode("latin-1")
    lines = head.split("\r\n")
    target = lines[0].split(" ")[1]
    headers = []
    for l in lines[1:]:
        if not l:
            break
        k, _, v = l.partition(":")
        headers.append((k, v.strip(" \t")))
    vals = []
    if c["kind"] == "query":
        q = urllib.parse.urlsplit(target).query
        vals = urllib.parse.parse_qs(q, keep_blank_values=True).get(c["name"], [])
    elif c["kind"] == "header":
        env = "HTTP_" + c["name"].upper().replace("-", "_")
        got = [v for k, v in headers if "HTTP_" + k.upper().replace("-", "_") == env]
        if got:
            vals = [",".join(got)]
    else:
        jar = http.cookies.SimpleCookie()
        for k, v in headers:
            if k.lower() == "cookie":
                jar.load(v)
        if c["name"] in jar:
            vals = [jar[c["name"]].value]
    out.append({"values": vals})
json.dump(out, sys.stdout)
`

type pyCase struct {
	Head string `json:"head"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// pythonReadings runs pythonScript over cases, or returns nil when python3
// is not installed.
func pythonReadings(tb testing.TB, cases []pyCase) []reading {
	tb.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command(py, "-c", pythonScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("python3: %v", err)
	}
	var rs []reading
	if err := json.Unmarshal(out, &rs); err != nil {
		tb.Fatalf("python3 output: %v\n%s", err, out)
	}
	return rs
}

const keyRules = `namespace: keys
routes:
  - {id: q, match: {pathPrefix: /q}, upstream: {targets: [{url: "http://%[1]s"}]}}
  - {id: h, match: {pathPrefix: /h}, upstream: {targets: [{url: "http://%[1]s"}]}}
  - {id: c, match: {pathPrefix: /c}, upstream: {targets: [{url: "http://%[1]s"}]}}
limits:
  - {id: by-user, routes: [q], key: ["query:user", "header:X-Case"], algorithm: fixed_window, rate: 1, period: 1h}
  - {id: by-key, routes: [h], key: ["header:X-Api-Key", "header:X-Case"], algorithm: fixed_window, rate: 1, period: 1h}
  - {id: by-sid, routes: [c], key: ["cookie:sid", "header:X-Case"], algorithm: fixed_window, rate: 1, period: 1h}
`

// TestKeysReadWhatUpstreamReads drives encoding tricks on query, header and
// cookie keys through a real node to an upstream that records the bytes it
// receives. Every trick is either refused with 400 problem+json naming the
// part, consuming nothing, or forwarded such that Go's and Python's parsers
// both read one value from the forwarded request, and that value is the
// one the node keyed on: a clean request with it finds its bucket already
// used (429).
func TestKeysReadWhatUpstreamReads(t *testing.T) {
	up := newRawUpstream(t)
	_, base, _ := MustStart(t, fmt.Sprintf(keyRules, up.ln.Addr()))
	addr := strings.TrimPrefix(base, "http://")

	long := strings.Repeat("x", 4000)
	tests := []struct {
		desc   string
		kind   string // query, header, cookie
		query  string // raw query; T is replaced by the case's token
		lines  string // raw header lines, "\n"-separated; T likewise
		refuse string // part named in the 400; "" when it must pass
	}{
		{desc: "query plain", kind: "query", query: "user=T"},
		{desc: "query undecodable first value", kind: "query", query: "user=%zz1&user=T", refuse: `query parameter \"user\" has a malformed percent-encoding`},
		{desc: "query undecodable only value", kind: "query", query: "user=%zzT", refuse: "malformed percent-encoding"},
		{desc: "query semicolon pair", kind: "query", query: "user=x;1&user=T", refuse: `query parameter \"user\"`},
		{desc: "query semicolon separator", kind: "query", query: "a=1;user=T", refuse: `pair with a \";\"`},
		{desc: "query repeated same value", kind: "query", query: "user=T&user=T", refuse: "is repeated"},
		{desc: "query repeated other case", kind: "query", query: "user=T&USER=x", refuse: "is repeated"},
		{desc: "query other case alone", kind: "query", query: "User=T", refuse: `is written as \"User\"`},
		{desc: "query encoded name", kind: "query", query: "us%65r=T", refuse: "is written as"},
		{desc: "query plus in name", kind: "query", query: "+user=T", refuse: "is written as"},
		{desc: "query NUL-terminated name", kind: "query", query: "user%00x=r1&user=T", refuse: "is written as"},
		{desc: "query escaped value", kind: "query", query: "user=al%69ce-T"},
		{desc: "query plus is space", kind: "query", query: "user=a+b-T"},
		{desc: "query encoded plus", kind: "query", query: "user=a%2bb-T"},
		{desc: "query NUL", kind: "query", query: "user=T%00x", refuse: "control character"},
		{desc: "query invalid UTF-8", kind: "query", query: "user=T%ff", refuse: "not valid UTF-8"},
		{desc: "query overlong UTF-8 dot", kind: "query", query: "user=%C0%AET", refuse: "not valid UTF-8"},
		{desc: "query valid UTF-8", kind: "query", query: "user=T%C3%A9"},
		{desc: "query empty value is missing", kind: "query", query: "user=&x=T"},
		{desc: "query bare name is missing", kind: "query", query: "user&x=T"},
		{desc: "query bad escape elsewhere", kind: "query", query: "a=%zz&user=T"},
		{desc: "query semicolon elsewhere", kind: "query", query: "user=T&a=1;b=2"},
		{desc: "query brackets are another name", kind: "query", query: "user[]=T"},
		{desc: "query long value", kind: "query", query: "user=T" + long},
		{desc: "query too many parameters", kind: "query", query: "user=T" + strings.Repeat("&a", 10000), refuse: "more than 10000 parameters"},
		{desc: "header plain", kind: "header", lines: "X-Api-Key: T"},
		{desc: "header repeated", kind: "header", lines: "X-Api-Key: r1\nX-Api-Key: T", refuse: `header \"X-Api-Key\" is repeated`},
		{desc: "header repeated other case", kind: "header", lines: "x-api-key: r1\nX-API-KEY: T", refuse: "is repeated"},
		{desc: "header repeated empty", kind: "header", lines: "X-Api-Key: T\nX-Api-Key:", refuse: "is repeated"},
		{desc: "header underscore alias", kind: "header", lines: "X_Api_Key: r1\nX-Api-Key: T", refuse: `also sent as \"X_api_key\"`},
		{desc: "header comma is one value", kind: "header", lines: "X-Api-Key: r1, T"},
		{desc: "header white space trimmed", kind: "header", lines: "X-Api-Key:    T   "},
		{desc: "header tab inside", kind: "header", lines: "X-Api-Key: T\tx", refuse: "control character"},
		{desc: "header empty is missing", kind: "header", lines: "X-Api-Key:"},
		{desc: "header named in Connection", kind: "header", lines: "X-Api-Key: T\nConnection: X-Api-Key", refuse: "named in Connection"},
		{desc: "cookie named in Connection", kind: "cookie", lines: "Cookie: sid=T\nConnection: keep-alive, cookie", refuse: "named in Connection"},
		{desc: "cookie plain", kind: "cookie", lines: "Cookie: sid=T"},
		{desc: "cookie space before name's equals", kind: "cookie", lines: "Cookie: sid =real; sid=T", refuse: `cookie \"sid\"`},
		{desc: "cookie space alone", kind: "cookie", lines: "Cookie: a=1; sid =T", refuse: "white space around its name"},
		{desc: "cookie repeated", kind: "cookie", lines: "Cookie: sid=r1; sid=T", refuse: `cookie \"sid\" is repeated`},
		{desc: "cookie other case", kind: "cookie", lines: "Cookie: SID=r1; sid=T", refuse: `is written as \"SID\"`},
		{desc: "cookie two lines", kind: "cookie", lines: "Cookie: sid=T\nCookie: a=1", refuse: `header \"Cookie\" is repeated`},
		{desc: "cookie quoted", kind: "cookie", lines: `Cookie: a=1; sid="T"`},
		{desc: "cookie bracket", kind: "cookie", lines: "Cookie: sid=a[b-T", refuse: "malformed value"},
		{desc: "cookie space in value", kind: "cookie", lines: "Cookie: sid=a b-T", refuse: "malformed value"},
		{desc: "cookie comma in value", kind: "cookie", lines: "Cookie: sid=T,x=1", refuse: "malformed value"},
		{desc: "cookie backslash escape", kind: "cookie", lines: `Cookie: sid="a\073T"`, refuse: "malformed value"},
		{desc: "cookie without equals", kind: "cookie", lines: "Cookie: a=T; sid", refuse: `has no \"=\"`},
		{desc: "cookie empty is missing", kind: "cookie", lines: "Cookie: a=T; sid="},
		{desc: "cookie percent stays", kind: "cookie", lines: "Cookie: sid=T%20x"},
		{desc: "cookie attribute after", kind: "cookie", lines: "Cookie: sid=T; Path=/"},
	}
	name := map[string]string{"query": "user", "header": "X-Api-Key", "cookie": "sid"}
	route := map[string]string{"query": "q", "header": "h", "cookie": "c"}
	type accepted struct {
		i        int
		head     []byte
		goReader reading
	}
	var passed []accepted
	for i, tt := range tests {
		tok := fmt.Sprintf("t%02d", i)
		path := fmt.Sprintf("/%s/%d", route[tt.kind], i)
		target := path
		if tt.query != "" {
			target += "?" + strings.ReplaceAll(tt.query, "T", tok)
		}
		var lines strings.Builder
		if tt.lines != "" {
			for _, l := range strings.Split(strings.ReplaceAll(tt.lines, "T", tok), "\n") {
				lines.WriteString(l + "\r\n")
			}
		}
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: keys.test\r\nX-Case: %s\r\n%sConnection: close\r\n\r\n", target, tok, lines.String())
		status, body := sendRaw(t, addr, req)
		if tt.refuse != "" {
			if status != http.StatusBadRequest || !strings.Contains(body, tt.refuse) || !strings.Contains(body, `"status":400`) {
				t.Errorf("%s: got %d %s; want 400 naming %s", tt.desc, status, body, tt.refuse)
			}
			if up.head(path) != nil {
				t.Errorf("%s: refused but forwarded", tt.desc)
			}
			// Nothing was consumed: the key the trick would most likely
			// have landed on (the case's missing part) is untouched.
			if st, _ := sendRaw(t, addr, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: keys.test\r\nX-Case: %s\r\nConnection: close\r\n\r\n", path, tok)); st != http.StatusOK {
				t.Errorf("%s: after the refusal a clean request got %d, want 200", tt.desc, st)
			}
			continue
		}
		if status != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", tt.desc, status, body)
			continue
		}
		head := up.head(path)
		if head == nil {
			t.Errorf("%s: not forwarded", tt.desc)
			continue
		}
		gr := goReading(t, head, tt.kind, name[tt.kind])
		v, ok := gr.value()
		if !ok {
			t.Errorf("%s: Go reads %q from the forwarded request, several values", tt.desc, gr.Values)
			continue
		}
		// The node keyed the trick on v: the same key, sent plainly, has
		// no quota left.
		var clean string
		switch {
		case v == "":
		case tt.kind == "query":
			clean = "?" + url.Values{"user": {v}}.Encode()
		case tt.kind == "header":
			clean = "\r\nX-Api-Key: " + v
		default:
			clean = "\r\nCookie: sid=" + v
		}
		cleanReq := fmt.Sprintf("GET %s%s HTTP/1.1\r\nHost: keys.test\r\nX-Case: %s\r\nConnection: close\r\n\r\n", path, "", tok)
		if strings.HasPrefix(clean, "?") {
			cleanReq = fmt.Sprintf("GET %s%s HTTP/1.1\r\nHost: keys.test\r\nX-Case: %s\r\nConnection: close\r\n\r\n", path, clean, tok)
		} else if clean != "" {
			cleanReq = fmt.Sprintf("GET %s HTTP/1.1\r\nHost: keys.test\r\nX-Case: %s%s\r\nConnection: close\r\n\r\n", path, tok, clean)
		}
		if st, _ := sendRaw(t, addr, cleanReq); st != http.StatusTooManyRequests {
			t.Errorf("%s: Go reads %q upstream, but that key sent plainly got %d, want 429 (the node keyed on something else)", tt.desc, v, st)
		}
		passed = append(passed, accepted{i: i, head: head, goReader: gr})
	}
	var cases []pyCase
	for _, a := range passed {
		cases = append(cases, pyCase{Head: string(a.head), Kind: tests[a.i].kind, Name: name[tests[a.i].kind]})
	}
	py := pythonReadings(t, cases)
	if py == nil {
		t.Log("python3 not found: forwarded requests were checked against Go's parsers only")
		return
	}
	for j, a := range passed {
		gv, _ := a.goReader.value()
		pv, ok := py[j].value()
		if !ok || pv != gv {
			t.Errorf("%s: Python reads %q from the forwarded request, Go (and the node) %q", tests[a.i].desc, py[j].Values, gv)
		}
	}
}
