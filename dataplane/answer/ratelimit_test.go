package answer

import (
	"net/http"
	"testing"
)

// TestRateLimitFields: a policy's fields, with and without a window, from
// AppendFields and SetFields alike; AppendFields allocates nothing (not
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
	} {
		p := NewRateLimitPolicy("api", tc.quota, tc.window)
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
		buf := make([]byte, 0, 160)
		if n := testing.AllocsPerRun(100, func() { p.AppendFields(buf, tc.rem, tc.reset) }); n != 0 {
			t.Errorf("%s: AppendFields allocates %v times", tc.name, n)
		}
	}
	if RateLimitNames != [5]string{"Ratelimit-Policy", "Ratelimit", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		t.Errorf("names %q", RateLimitNames)
	}
}

func TestSetRetryAfter(t *testing.T) {
	t.Parallel()
	h := http.Header{"Retry-After": {"9"}}
	SetRetryAfter(h, 3)
	if got := h["Retry-After"]; len(got) != 1 || got[0] != "3" {
		t.Fatalf("Retry-After %q", got)
	}
}
