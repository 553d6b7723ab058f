package limit

import (
	"unsafe" // go:linkname, unsafeString
)

// nanotime is the runtime's monotonic clock. The runtime keeps this linkname
// for external packages on purpose (see the comment on runtime.nanotime and
// go.dev/issue/67401); it costs a vDSO clock_gettime(CLOCK_MONOTONIC) and no
// wall-clock read, which makes it about twice as cheap as time.Now.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the production clock of every limiter: nanoseconds on the
// runtime's monotonic scale (the same clock time.Now's monotonic reading
// uses, with an arbitrary origin). It never goes backwards and is unaffected
// by wall-clock changes. Integrators pass Now() as the now argument of
// Limiter.Take and Limiter.Refund, so that every limiter shares one scale.
func Now() int64 { return nanotime() }

// unsafeString views b as a string without copying. The caller must not
// modify b while the string is in use, nor let the string outlive b.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
