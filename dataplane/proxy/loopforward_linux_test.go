//go:build linux

package proxy

import (
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicegw/sluice/dataplane/internal/evloop"
)

// loopRecorder is a ForwardLoop caller's side: it records the gateway's
// own answer (Header, Write, WriteHeader) and when LoopDone came.
type loopRecorder struct {
	h        http.Header
	status   int
	body     []byte
	returned *bool // set once ForwardLoop has returned
	done     chan loopDone
}

type loopDone struct {
	o             Outcome
	afterReturned bool
	status        int
}

func (r *loopRecorder) Header() http.Header { return r.h }
func (r *loopRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *loopRecorder) Write(b []byte) (int, error) {
	r.body = append(r.body, b...)
	return len(b), nil
}
func (r *loopRecorder) LoopDone(o Outcome) {
	r.done <- loopDone{o: o, afterReturned: *r.returned, status: r.status}
}

// TestForwardLoopDoneAfterReturn: an exchange that ends before anything is
// sent (here, the loop's pool for the target is full) is answered 502
// through the caller's writer, and LoopDone comes on the loop only after
// ForwardLoop has returned, never from inside it: the caller needs no
// guard against an answer arriving while it is still starting the forward.
func TestForwardLoopDoneAfterReturn(t *testing.T) {
	rt := mustCompile(t, `namespace: x
routes:
  - {id: api, match: {pathPrefix: /}, upstream: {targets: [{url: "http://127.0.0.1:9"}]}}
`, false)
	u := rt.Upstream("api")
	l, err := evloop.New(0)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.Run() }()
	defer l.Stop()

	var returned bool
	rec := &loopRecorder{h: http.Header{}, returned: &returned, done: make(chan loopDone, 1)}
	ctx := new(fasthttp.RequestCtx)
	ctx.Request.SetRequestURI("/x")
	ctx.Request.Header.SetHost("gw.example")
	err = l.Call(func() {
		u.targets[0].loopPool(l).max = 0 // full: no connection may be had
		u.ForwardLoop(l, rec, rec, ctx, FastRequest{RequestID: "req-1"}, Match{Path: "/x"})
		returned = true
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-rec.done:
		if !d.afterReturned {
			t.Fatal("LoopDone was called before ForwardLoop returned")
		}
		if d.o.Status != http.StatusBadGateway || d.o.Err == nil || d.status != http.StatusBadGateway {
			t.Fatalf("outcome %+v, answer status %d: want a 502 with the pool's error", d.o, d.status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no LoopDone")
	}
}
