package answer

import (
	"net/http"
	"testing"
)

// TestRateLimitFields: a policy's fields, with and without a window, from
// AppendFields and SetFields alike, an id longer than SetFields' block
// included; AppendFields allocates nothing and SetFields once (not
// parallel: AllocsPerRun).
func TestRateLimitFields(t *testing.T) {
	for _, tc := range []struct {
		name          string
		quota, window int64
		rem, reset    int64
		want          [5]string
	}{
		{"window", 100, 60, 7, 12, [5]string{`"api";q=100;w=60`, `"api";r=7;t=12`, "100", "7", "12"}},
		{"concurrency", 8, 0, 3, 0, [5]string{`"api";q=8`, `"api";r=3`, "8", "3", "0"}},
		{"long id", 1000000000, 3600, 999999999, 3600, [5]string{`"` + longID + `";q=1000000000;w=3600`,
			`"` + longID + `";r=999999999;t=3600`, "1000000000", "999999999", "3600"}},
	} {
		id := "api"
		if tc.name == "long id" {
			id = longID
		}
		p := NewRateLimitPolicy(id, tc.quota, tc.window)
		b, ends := p.AppendFields([]byte("x"), tc.rem, tc.reset)
		start := 1
		for i, name := range RateLimitNames {
			if got := string(b[start:ends[i]]); got != tc.want[i] {
				t.Errorf("%s: %s = %q, want %q", tc.name, name, got, tc.want[i])
			}
			start = ends[i]
		}
		h := http.Header{}
		p.SetFields(h, tc.rem, tc.reset)
		for i, name := range RateLimitNames {
			if got := h[name]; len(got) != 1 || got[0] != tc.want[i] {
				t.Errorf("%s: map %s = %q, want [%q]", tc.name, name, got, tc.want[i])
			}
		}
		if tc.name != "long id" {
			if n := testing.AllocsPerRun(100, func() { p.SetFields(h, tc.rem, tc.reset) }); n != 1 {
				t.Errorf("%s: SetFields allocates %v times, want 1", tc.name, n)
			}
		}
		buf := make([]byte, 0, 256)
		if n := testing.AllocsPerRun(100, func() { p.AppendFields(buf, tc.rem, tc.reset) }); n != 0 {
			t.Errorf("%s: AppendFields allocates %v times", tc.name, n)
		}
	}
	if RateLimitNames != [5]string{"Ratelimit-Policy", "Ratelimit", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		t.Errorf("names %q", RateLimitNames)
	}
}

// longID is a limit id whose fields do not fit SetFields' block.
const longID = "a-limit-id-long-enough-that-its-fields-outgrow-the-block-of-set-fields"

func TestSetRetryAfter(t *testing.T) {
	t.Parallel()
	h := http.Header{"Retry-After": {"9"}}
	SetRetryAfter(h, 3)
	if got := h["Retry-After"]; len(got) != 1 || got[0] != "3" {
		t.Fatalf("Retry-After %q", got)
	}
}
