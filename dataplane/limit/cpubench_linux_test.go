package limit

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuLoop runs body b.N times (b.Loop) on one locked OS thread and reports
// the thread's CPU time per iteration as "cpu-ns/op": unlike ns/op (wall
// time), it does not grow when other processes share the cores, so figures
// from a busy machine stay comparable.
func cpuLoop(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &before)
	n := 0
	for b.Loop() {
		body()
		n++
	}
	_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &after)
	cpu := func(ru *syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if n > 0 {
		b.ReportMetric(float64(cpu(&after)-cpu(&before))/float64(n), "cpu-ns/op")
	}
}
