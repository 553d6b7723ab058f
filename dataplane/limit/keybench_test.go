package limit

import (
	"github.com/sluicegw/sluice/dataplane/reqview/classify"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// BenchmarkKeyHash measures key extraction and hashing for one request over
// a composite key of every kind of part (ip, route, header, query, cookie),
// on a request of typical size (several query parameters and cookies).
func BenchmarkKeyHash(b *testing.B) {
	ks, err := classify.ParseKey([]string{"ip", "route", "header:X-Api-Key", "query:user", "cookie:sid"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api/orders?page=2&sort=desc&user=alice%40example.com&lang=en", nil)
	r.Header.Set("X-Api-Key", "k-0123456789abcdef")
	r.Header.Set("Cookie", "theme=dark; lang=en; sid=s-0123456789abcdef; _ga=GA1.2.3")
	info := RequestInfo{RouteID: "orders", ClientIP: netip.MustParseAddr("2001:db8::1")}
	b.ReportAllocs()
	v := info.View(r)
	cpuLoop(b, func() { ks.Hash(&v) })
}

// BenchmarkKeyCheckAndHash is what the request path does: the ambiguity
// check (KeyCheck.ReadView over the same key), then the hash over the values it
// kept. The whole cost of key extraction per request. Peer:
// BenchmarkKeyHash (extraction and hash, no check).
func BenchmarkKeyCheckAndHash(b *testing.B) {
	key := []string{"ip", "route", "header:X-Api-Key", "query:user", "cookie:sid"}
	ks, err := classify.ParseKey(key, 0)
	if err != nil {
		b.Fatal(err)
	}
	kc := classify.NewKeyCheck(key)
	r := httptest.NewRequest("GET", "/api/orders?page=2&sort=desc&user=alice%40example.com&lang=en", nil)
	r.Header.Set("X-Api-Key", "k-0123456789abcdef")
	r.Header.Set("Cookie", "theme=dark; lang=en; sid=s-0123456789abcdef; _ga=GA1.2.3")
	info := RequestInfo{RouteID: "orders", ClientIP: netip.MustParseAddr("2001:db8::1")}
	b.ReportAllocs()
	cpuLoop(b, func() {
		v := info.View(r)
		if err := kc.ReadView(&v); err != nil {
			b.Fatal(err)
		}
		ks.Hash(&v)
	})
}

// BenchmarkKeyCheck is the ambiguity check alone on BenchmarkKeyHash's
// request.
func BenchmarkKeyCheck(b *testing.B) {
	kc := classify.NewKeyCheck([]string{"ip", "route", "header:X-Api-Key", "query:user", "cookie:sid"})
	r := httptest.NewRequest("GET", "/api/orders?page=2&sort=desc&user=alice%40example.com&lang=en", nil)
	r.Header.Set("X-Api-Key", "k-0123456789abcdef")
	r.Header.Set("Cookie", "theme=dark; lang=en; sid=s-0123456789abcdef; _ga=GA1.2.3")
	b.ReportAllocs()
	cpuLoop(b, func() {
		if err := kc.Check(r); err != nil {
			b.Fatal(err)
		}
	})
}
