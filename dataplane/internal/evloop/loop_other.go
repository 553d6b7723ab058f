//go:build !linux

package evloop

// Supported reports whether event loops are built for this system: they
// are Linux-only (epoll).
const Supported = false
