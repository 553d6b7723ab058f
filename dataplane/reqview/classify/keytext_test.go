package classify

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestKeyTextHidesValues: the key text that reaches logs and Redis names the
// client IP and route but never a header, query or cookie value, which are
// often credentials; equal values give equal text.
func TestKeyTextHidesValues(t *testing.T) {
	t.Parallel()
	ks, err := ParseKey([]string{"ip", "route", "header:Authorization", "query:api_key", "cookie:session", "header:X-Absent"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	req := func(token string) string {
		r := httptest.NewRequest("GET", "/x?api_key=k-"+token, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Cookie", "session=s-"+token)
		info := &testInfo{RouteID: "orders", ClientIP: netip.MustParseAddr("192.0.2.7")}
		v := info.View(r)
		return ks.Text(&v)
	}
	a, b, a2 := req("s3cret-one"), req("s3cret-two"), req("s3cret-one")
	for _, secret := range []string{"s3cret", "Bearer"} {
		if strings.Contains(a, secret) {
			t.Fatalf("key text %q shows %q", a, secret)
		}
	}
	if !strings.Contains(a, "ip=192.0.2.7") || !strings.Contains(a, "route=orders") || !strings.Contains(a, "header:X-Absent=<missing>") {
		t.Fatalf("key text %q lacks the readable parts", a)
	}
	if a != a2 || a == b {
		t.Fatalf("digests: same value %q vs %q, other value %q", a, a2, b)
	}
}

// TestKeyTextIPv6Prefix: an IPv6 client's key text (what cluster limits
// share through Redis) is its prefix, so every node keys the /64 alike.
func TestKeyTextIPv6Prefix(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	for _, tt := range []struct {
		bits       int
		addr, want string
	}{
		{0, "2001:db8:1:2::9", "ip=2001:db8:1:2::/64"},
		{48, "2001:db8:1:2::9", "ip=2001:db8:1::/48"},
		{128, "2001:db8:1:2::9", "ip=2001:db8:1:2::9"},
		{64, "192.0.2.7", "ip=192.0.2.7"},
	} {
		ks, err := ParseKey([]string{"ip"}, tt.bits)
		if err != nil {
			t.Fatal(err)
		}
		v := testInfo{ClientIP: netip.MustParseAddr(tt.addr)}.View(r)
		if got := ks.Text(&v); got != tt.want {
			t.Errorf("/%d %s: key text %q, want %q", tt.bits, tt.addr, got, tt.want)
		}
	}
}
