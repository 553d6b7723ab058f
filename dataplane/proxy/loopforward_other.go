//go:build !linux

package proxy

// The event-loop engine is Linux-only (package evloop): elsewhere no route
// is forwarded on a loop.

// LoopCapable reports false: there are no event loops on this system.
func (u *Upstream) LoopCapable() bool { return false }

type loopPools struct{}

func closeLoops(*origin) {}

func closeLoopsIdle(*origin) {}
