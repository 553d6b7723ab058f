package degrade

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/reqview"
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
)

// TestLimitAndDegradeReadKeysAlike: a limit and a degrade plan over the same
// key read every request the same way (one reading, package reqview through
// classify.Key): two requests are one client to the limit exactly when they are
// one client to the degrade plan, and the key check refuses the same
// ambiguous shapes for both. Each case is run the way the gateway serves: the
// route's KeyCheck reads the view first, then the rules key on it.
func TestLimitAndDegradeReadKeysAlike(t *testing.T) {
	t.Parallel()
	ip1, ip2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	type req struct {
		target string
		hdr    []string // name, value pairs
		ip     netip.Addr
	}
	tests := []struct {
		desc    string
		key     []string
		a, b    req
		same    bool
		refused bool // the key check refuses a (b is then not compared)
	}{
		{"space as %20 and as + is one client", []string{"query:user"}, req{"/?user=a%20b", nil, ip1}, req{"/?user=a+b", nil, ip1}, true, false},
		{"an encoded percent is another value", []string{"query:user"}, req{"/?user=a%20b", nil, ip1}, req{"/?user=a%2520b", nil, ip1}, false, false},
		{"a respelled letter is one client", []string{"query:user"}, req{"/?user=al%69ce", nil, ip1}, req{"/?user=alice", nil, ip1}, true, false},
		{"an empty parameter is a missing one", []string{"query:user"}, req{"/?user=", nil, ip1}, req{"/?other=1", nil, ip1}, true, false},
		{"another parameter's value is ignored", []string{"query:user"}, req{"/?user=a&page=1", nil, ip1}, req{"/?page=2&user=a", nil, ip1}, true, false},
		{"a repeated parameter is refused", []string{"query:user"}, req{"/?user=a&user=b", nil, ip1}, req{}, false, true},
		{"a percent-encoded name is refused", []string{"query:user"}, req{"/?%75ser=a", nil, ip1}, req{}, false, true},
		{"a malformed escape is refused", []string{"query:user"}, req{"/?user=a%ZZ", nil, ip1}, req{}, false, true},
		{"a name next to ; is refused", []string{"query:user"}, req{"/?user=a;user=b", nil, ip1}, req{}, false, true},
		{"a header key ignores the client", []string{"header:X-User"}, req{"/", []string{"X-User", "a"}, ip1}, req{"/", []string{"X-User", "a"}, ip2}, true, false},
		{"a header key is case-insensitive in the rule", []string{"header:x-user"}, req{"/", []string{"X-User", "a"}, ip1}, req{"/", []string{"x-user", "a"}, ip1}, true, false},
		{"an empty header is a missing one", []string{"header:X-User"}, req{"/", []string{"X-User", ""}, ip1}, req{"/", nil, ip1}, true, false},
		{"a header value differs", []string{"header:X-User"}, req{"/", []string{"X-User", "a"}, ip1}, req{"/", []string{"X-User", "b"}, ip1}, false, false},
		{"a repeated header is refused", []string{"header:X-User"}, req{"/", []string{"X-User", "a", "X-User", "b"}, ip1}, req{}, false, true},
		{"a header named in Connection is refused", []string{"header:X-User"}, req{"/", []string{"X-User", "a", "Connection", "x-user"}, ip1}, req{}, false, true},
		{"a quoted cookie is the unquoted one", []string{"cookie:sid"}, req{"/", []string{"Cookie", `sid="x"`}, ip1}, req{"/", []string{"Cookie", "a=1; sid=x"}, ip1}, true, false},
		{"an empty cookie is a missing one", []string{"cookie:sid"}, req{"/", []string{"Cookie", "sid="}, ip1}, req{"/", []string{"Cookie", "a=1"}, ip1}, true, false},
		{"a repeated cookie is refused", []string{"cookie:sid"}, req{"/", []string{"Cookie", "sid=x; sid=y"}, ip1}, req{}, false, true},
		{"parts do not run into one another", []string{"header:X-A", "header:X-B"}, req{"/", []string{"X-A", "a", "X-B", "bc"}, ip1}, req{"/", []string{"X-A", "ab", "X-B", "c"}, ip1}, false, false},
		{"a missing part is not an empty neighbour", []string{"header:X-A", "header:X-B"}, req{"/", []string{"X-A", "a"}, ip1}, req{"/", []string{"X-B", "a"}, ip1}, false, false},
		{"IPv6 clients of one /64 are one client", []string{"ip"}, req{"/", nil, netip.MustParseAddr("2001:db8:1:2::1")}, req{"/", nil, netip.MustParseAddr("2001:db8:1:2::ff")}, true, false},
		{"IPv6 clients of two /64s are two", []string{"ip"}, req{"/", nil, netip.MustParseAddr("2001:db8:1:2::1")}, req{"/", nil, netip.MustParseAddr("2001:db8:1:3::1")}, false, false},
		{"an IPv4-mapped client is the IPv4 one", []string{"ip"}, req{"/", nil, netip.MustParseAddr("::ffff:192.0.2.1")}, req{"/", nil, ip1}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			lk, err := classify.ParseKey(tc.key, 0)
			if err != nil {
				t.Fatal(err)
			}
			dc := MustCompile(t, []api.Degrade{{ID: "d", Mode: api.DegradeManual, Key: tc.key}}, nil, Options{}).ForRoute("r")
			kc := classify.NewKeyCheck(tc.key)
			view := func(q req) (*reqview.View, error) {
				r := httptest.NewRequest("GET", q.target, nil)
				for i := 0; i+1 < len(q.hdr); i += 2 {
					r.Header.Add(q.hdr[i], q.hdr[i+1])
				}
				v := reqview.FromRequest(r)
				v.ClientIP, v.RouteID = q.ip, "r"
				return &v, kc.ReadView(&v)
			}
			va, err := view(tc.a)
			if tc.refused {
				if err == nil {
					t.Fatalf("the key check let %s %v through", tc.a.target, tc.a.hdr)
				}
				return
			}
			if err != nil {
				t.Fatalf("the key check refused a: %v", err)
			}
			vb, err := view(tc.b)
			if err != nil {
				t.Fatalf("the key check refused b: %v", err)
			}
			limitSame := lk.Hash(va) == lk.Hash(vb)
			stableSame := lk.StableHash(va) == lk.StableHash(vb)
			degradeSame := dc.KeyHash(va) == dc.KeyHash(vb)
			textSame := lk.Text(va) == lk.Text(vb)
			if limitSame != tc.same || degradeSame != tc.same || stableSame != tc.same || textSame != tc.same {
				t.Fatalf("one client: limit %v, degrade %v, stable hash %v, key text %v; want %v for all",
					limitSame, degradeSame, stableSame, textSame, tc.same)
			}
		})
	}
}
