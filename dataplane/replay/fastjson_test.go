package replay

import (
	"encoding/json"
	"reflect"
	"testing"
)

var jsonSeeds = []string{
	`{"ts": 1700000000.25, "ip": "192.0.2.1", "method": "GET", "host": "shop.example.com", "path": "/a?b=c", "headers": {"Cookie": "sid=1", "X-A": ["1", "2"], "X-E": []}}`,
	`{"ts":"2026-12-04T10:00:00Z","ip":"::1","method":"POST","path":"/x\u0026y\/z\"q\\\n","status":200,"dur":0.5,"tags":[1,"a",{"b":[true,false,null]}],"n":null}`,
	`{"path": "/\ud83d\ude00 \ud83d x \udc00", "ts": 1e9, "ip": "1.2.3.4", "method": "GET"}`,
	`  { }  `,
	`{"TS": 5, "ip": "1.2.3.4", "method": "GET", "path": "/"}`,
	`{"ts": null, "ip": "1.2.3.4", "method": "GET", "path": "/"}`,
	`{"ts": 01, "ip": "1.2.3.4"}`,
	`{"ts": 1, "ip": "1.2.3.4",}`,
	`{"ts": 1, "headers": {"a": 1}}`,
	`{"ts": 1, "headers": null}`,
	`{"ts": 1} x`,
	`{"ts": -1.5E+3, "ip": "\xff"}`,
	`{"ip": "a\tb"}`,
	`[1, 2]`,
	`{"x": {"y": {"z": [[[]]]}}, "ip": "9.9.9.9"}`,
	`{"ts": 1, "ip": "1.2.3.4", "ip": "5.6.7.8"}`,
}

// FuzzFastJSON: whenever fastJSON reads a line, encoding/json reads it too
// and to the same fields; when it does not, the caller falls back to
// encoding/json, so it may refuse anything.
func FuzzFastJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast, slow jsonLine
		if !fastJSON(line, &fast) {
			return
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fastJSON read %q, encoding/json refuses it: %v", line, err)
		}
		if string(fast.TS) != string(slow.TS) || fast.IP != slow.IP || fast.Method != slow.Method || fast.Host != slow.Host || fast.Path != slow.Path ||
			!reflect.DeepEqual(fast.Headers, slow.Headers) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", line, fast, slow)
		}
	})
}

// TestFastJSONReadsTheUsualShape: the common lines take the fast path (the
// fuzz seeds above check it agrees with encoding/json).
func TestFastJSONReadsTheUsualShape(t *testing.T) {
	t.Parallel()
	for _, s := range jsonSeeds[:4] {
		var j jsonLine
		if !fastJSON([]byte(s), &j) {
			t.Errorf("fastJSON refused %q", s)
		}
	}
	for _, s := range jsonSeeds[4:11] {
		var j jsonLine
		if fastJSON([]byte(s), &j) {
			t.Errorf("fastJSON read %q, which it should leave to encoding/json", s)
		}
	}
}
