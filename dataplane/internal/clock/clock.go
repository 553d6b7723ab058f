// Package clock is the request path's clock, shared by the limiters, breakers
// and degrade controllers so that their readings are on one scale.
package clock

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock. The runtime keeps this linkname
// for external packages on purpose (see the comment on runtime.nanotime and
// go.dev/issue/67401); it costs a vDSO clock_gettime(CLOCK_MONOTONIC) and no
// wall-clock read, which makes it about twice as cheap as time.Now.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns nanoseconds on the runtime's monotonic scale (the scale of
// time.Now's monotonic reading, with an arbitrary origin). It never goes
// backwards and is unaffected by wall-clock changes. Safe for concurrent use.
func Now() int64 { return nanotime() }
