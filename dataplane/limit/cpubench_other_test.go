//go:build !linux

package limit

import "testing"

// cpuLoop runs body b.N times; CPU time is reported on Linux only.
func cpuLoop(b *testing.B, body func()) {
	for b.Loop() {
		body()
	}
}
