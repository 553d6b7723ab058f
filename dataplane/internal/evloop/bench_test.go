//go:build linux

package evloop

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkEmptyRead is what a read of a socket with nothing to read costs:
// the system call the runtime's poller makes before it waits (syscall, a
// read that fails with EAGAIN), against a loop's Conn.Read once a read has
// drained the socket (no system call until epoll reports it readable). On
// a machine where system calls are dear (page-table isolation without
// PCID), the first is most of a microsecond, twice per proxied request.
func BenchmarkEmptyRead(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[1])
	buf := make([]byte, 512)
	b.Run("syscall", func(b *testing.B) {
		for b.Loop() {
			if _, err := read(fds[0], buf); err != unix.EAGAIN {
				b.Fatal(err)
			}
		}
	})
	l, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := l.Add(fds[0], handlerFuncs{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("loop", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Read(buf); err != ErrWouldBlock {
				b.Fatal(err)
			}
		}
	})
}
