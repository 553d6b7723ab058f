package reqview

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

func TestValidTraceparent(t *testing.T) {
	t.Parallel()
	const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		desc string
		in   string
		want bool
	}{
		{"version 00", ok, true},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"a later version with more fields", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true},
		{"a later version, exact length", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"version 00 with more", ok + "-x", false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"upper-case hex", strings.ToUpper(ok), false},
		{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"all-zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false},
		{"a later version glued on", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ValidTraceparent(tc.in); got != tc.want {
				t.Fatalf("ValidTraceparent(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestEnsureTrace(t *testing.T) {
	t.Parallel()
	const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		desc      string
		parents   []string
		state     string
		keep      bool // the client's traceparent and tracestate pass
		wantTrace string
	}{
		{"a valid one passes with its state", []string{ok}, "vendor=x", true, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"none starts a trace", nil, "", false, ""},
		{"an invalid one starts a trace and drops the state", []string{"00-zz"}, "vendor=x", false, ""},
		{"two start a trace", []string{ok, ok}, "vendor=x", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			h := http.Header{}
			for _, p := range tc.parents {
				h.Add(HeaderTraceparent, p)
			}
			if tc.state != "" {
				h.Set(HeaderTracestate, tc.state)
			}
			tr := EnsureTrace(h)
			if tr.Started == tc.keep {
				t.Fatalf("Started = %v, want %v", tr.Started, !tc.keep)
			}
			if got := h.Values(HeaderTraceparent); len(got) != 1 || got[0] != tr.Parent || !ValidTraceparent(got[0]) {
				t.Fatalf("forwarded traceparent %q, trace %q", got, tr.Parent)
			}
			if tc.keep {
				if tr.TraceID() != tc.wantTrace || h.Get(HeaderTracestate) != tc.state {
					t.Fatalf("trace id %q state %q, want %q %q", tr.TraceID(), h.Get(HeaderTracestate), tc.wantTrace, tc.state)
				}
				return
			}
			if _, ok := h[HeaderTracestate]; ok {
				t.Fatal("tracestate kept for a trace the gateway started")
			}
			if len(tr.TraceID()) != 32 || len(tr.ParentID()) != 16 || !strings.HasSuffix(tr.Parent, "-01") {
				t.Fatalf("started trace %q", tr.Parent)
			}
		})
	}
	a, b := NewTraceparent(), NewTraceparent()
	if a[3:35] == b[3:35] {
		t.Fatalf("two started traces share the trace id %s", a[3:35])
	}
}

// TestSetParentID: the gateway's span in the client's trace replaces the
// client's parent id, keeping the trace id and flags (a later version is
// sent as version 00), and Carry puts it in the header with the client's
// tracestate; a trace the gateway started is left with its own parent id,
// and a trace that replaces nothing leaves the header alone.
func TestSetParentID(t *testing.T) {
	id := [8]byte{0x0a, 0xb1, 0x02, 0xc3, 0x04, 0xd5, 0x06, 0xef}
	for _, tc := range []struct{ in, want string }{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0ab102c304d506ef-01"},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-extra", "00-4bf92f3577b34da6a3ce929d0e0e4736-0ab102c304d506ef-03"},
	} {
		h := http.Header{HeaderTraceparent: {tc.in}, HeaderTracestate: {"vendor=x"}}
		tr := EnsureTrace(h)
		tr.Carry(h)
		if tr.Replaces() || h.Get(HeaderTraceparent) != tc.in {
			t.Fatalf("%s: the client's trace replaced before the gateway's span: %q", tc.in, h.Get(HeaderTraceparent))
		}
		tr.SetParentID(id)
		if tr.Parent != tc.want || !tr.Child || !tr.Replaces() || !ValidTraceparent(tr.Parent) {
			t.Fatalf("%s: Parent %q (Child %v), want %q", tc.in, tr.Parent, tr.Child, tc.want)
		}
		tr.Unsample() // a caller's flags are its own
		tr.Carry(h)
		if got := h.Values(HeaderTraceparent); len(got) != 1 || got[0] != tc.want || h.Get(HeaderTracestate) != "vendor=x" {
			t.Fatalf("%s: header %q, want traceparent %q and the client's tracestate", tc.in, h, tc.want)
		}
		if n := testing.AllocsPerRun(10, func() { tr.Carry(h) }); n != 0 {
			t.Errorf("Carry allocates %v times", n)
		}
	}
	h := http.Header{}
	started := EnsureTrace(h)
	before := started.Parent
	started.SetParentID(id)
	if started.Parent != before || started.Child || h.Get(HeaderTraceparent) != before {
		t.Fatalf("a started trace changed: %q, now %q", before, started.Parent)
	}
}

func TestQueryPart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, raw, name, want string
		ok                    bool
	}{
		{"plain", "user=alice", "user", "alice", true},
		{"percent space", "user=a%20b", "user", "a b", true},
		{"plus space", "user=a+b", "user", "a b", true},
		{"first wins", "user=a&user=b", "user", "a", true},
		{"encoded name", "%75ser=a", "user", "a", true},
		{"malformed escape read raw", "user=a%ZZ", "user", "a%ZZ", true},
		{"empty is missing", "user=", "user", "", false},
		{"bare name is missing", "user", "user", "", false},
		{"absent", "page=1", "user", "", false},
		{"prefix of another name", "username=a", "user", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := QueryPart(tc.raw, tc.name)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("QueryPart(%q, %q) = %q, %v; want %q, %v", tc.raw, tc.name, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func BenchmarkEnsureTrace(b *testing.B) {
	for _, tc := range []struct{ name, parent string }{
		{"kept", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"started", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			h := http.Header{}
			if tc.parent != "" {
				h[HeaderTraceparent] = []string{tc.parent}
			}
			for b.Loop() {
				if tc.parent == "" {
					delete(h, HeaderTraceparent)
				}
				EnsureTrace(h)
			}
		})
	}
}

// TestPutHex: putHex agrees with fmt's %016x.
func TestPutHex(t *testing.T) {
	for _, x := range []uint64{0, 1, 9, 10, 15, 16, 0xabcdef0123456789, 0xfedcba9876543210, 1<<64 - 1, 0x0a0b0c0d0e0f1011} {
		var b [16]byte
		putHex(b[:], x)
		if got, want := string(b[:]), fmt.Sprintf("%016x", x); got != want {
			t.Errorf("putHex(%#x) = %q, want %q", x, got, want)
		}
	}
	for range 10000 {
		x := rand.Uint64()
		var b [16]byte
		putHex(b[:], x)
		if got, want := string(b[:]), fmt.Sprintf("%016x", x); got != want {
			t.Fatalf("putHex(%#x) = %q, want %q", x, got, want)
		}
	}
}
