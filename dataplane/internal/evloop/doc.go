// Package evloop runs many connections on a few goroutines, each an event
// loop over an epoll instance, as nginx's workers do, instead of one
// goroutine per connection on the runtime's poller.
//
// Why: a goroutine that waits for a socket must first try to read it (the
// runtime's poller resets a socket's readiness before each read and waits
// only after a read that would block), so a proxied HTTP/1.1 exchange costs
// two reads that find nothing, each a system call, on top of the scheduler's
// hand-offs between threads. A loop waits in epoll_wait for every
// connection at once and reads a connection only once epoll has said it is
// readable (remembering, as nginx does, that a short read drained it), so an
// exchange costs what it must: one read and one write on each side. Where a
// system call costs a microsecond or more (a guest with page-table
// isolation and no PCID, as the project's machines are), that is most of a
// request's CPU time.
//
// A Loop owns its connections: their callbacks (Handler) run on the loop's
// goroutine one at a time, and must not block. Work that may block (a dial
// that resolves a name, a stream of unknown length) runs on a goroutine of
// its own and reports back with Post (Yield lets such goroutines run on the
// loop's thread before it sleeps), or takes the connection out of the
// loop for good with Detach, which turns it into an ordinary net.Conn on
// the runtime's poller. While such goroutines are out (Away until their
// Back), the loop waits on the runtime's poller rather than in epoll_wait:
// its epoll descriptor, readable while events are ready, is registered
// there, and the loop's goroutine parks until it is readable or the
// earliest deadline passes, so that the goroutines' own sockets (a Redis
// reply) and the loop's are watched in one wait on one thread, instead of
// the loop's thread holding its processor in a system call meanwhile.
//
// Deadlines are one per connection (SetDeadline), kept in a heap with lazy
// removal: moving a deadline later, the common case (a keep-alive
// connection's idle bound after each request), costs no heap operation.
//
// The package is Linux-only; Supported reports whether it is built.
package evloop
