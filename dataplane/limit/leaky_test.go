package limit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/api"
)

// TestLeakyBucketAccuracy drives a leaky bucket (rate 100/s, burst 100) with
// a constant-rate generator at 1.5×, 3× and 10× its rate for 10 s of injected
// time. Like nginx limit_req burst=, it must admit the burst at once and then
// the rate: burst + rate·10s = 1100 (±1), with maxDelay 0 (nodelay: nothing
// waits) and with a maxDelay that covers the queue (admitted requests wait at
// most maxDelay, in order).
func TestLeakyBucketAccuracy(t *testing.T) {
	t.Parallel()
	const rate, burst = 100, 100
	const dur = 10 * time.Second
	tests := []struct {
		desc     string
		maxDelay time.Duration
	}{
		{desc: "nodelay (maxDelay 0)"},
		{desc: "delay (maxDelay 1s)", maxDelay: time.Second},
	}
	for _, tt := range tests {
		for _, load := range []float64{1.5, 3, 10} {
			t.Run(fmt.Sprintf("%s at %.1fx", tt.desc, load), func(t *testing.T) {
				t.Parallel()
				lo := mustLocal(t, api.Limit{Algorithm: api.LeakyBucket, Rate: rate, Burst: burst, MaxDelay: api.Duration(tt.maxDelay)})
				interval := time.Duration(float64(time.Second) / (rate * load))
				var admitted, offered int64
				var maxWait time.Duration
				for at := time.Duration(0); at < dur; at += interval {
					offered++
					d, _ := lo.Take(context.Background(), "", 1, t0+int64(at))
					if !d.Allowed {
						continue
					}
					admitted++
					maxWait = max(maxWait, d.Delay)
					if tt.maxDelay == 0 && d.Delay != 0 {
						t.Fatalf("nodelay request at %v delayed %v", at, d.Delay)
					}
				}
				want := int64(burst + rate*dur.Seconds())
				t.Logf("offered %d in %v: admitted %d, want %d; longest wait %v", offered, dur, admitted, want, maxWait)
				if admitted < want-1 || admitted > want+1 {
					t.Errorf("admitted %d of %d, want %d ±1", admitted, offered, want)
				}
				if maxWait > tt.maxDelay {
					t.Errorf("longest wait %v > maxDelay %v", maxWait, tt.maxDelay)
				}
			})
		}
	}
}
