package etcdwatch

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	minD, maxD := 100*time.Millisecond, time.Second
	for n := 1; n < 40; n++ {
		want := min(minD<<min(n-1, 20), maxD)
		for range 20 {
			if d := Backoff(n, minD, maxD); d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
}
