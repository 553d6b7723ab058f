package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicegw/sluice/dataplane/internal/testca"
)

// rawCodec carries messages as raw bytes, so the test service needs no
// generated code: requests and responses are *[]byte.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

func init() { encoding.RegisterCodec(rawCodec{}) }

// echoServer is the test service's handler type: the service has no state.
type echoServer interface{}

// echoDeadlines records the deadline each upstream call saw, by payload.
type echoDeadlines struct {
	mu   sync.Mutex
	left map[string]time.Duration // -1: no deadline
}

func (d *echoDeadlines) record(ctx context.Context, key string) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	d.left[key] = left
	d.mu.Unlock()
}

func (d *echoDeadlines) get(key string) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.left[key]
	return v, ok
}

// echoDesc is sluice.test.Echo: Unary (and its aliases Slow, Limited,
// Shed, matched by their own routes) echoes "echo:<payload>" with a
// trailer; a payload "sleep:<duration>" waits that long or until the
// call's context ends, "block:<duration>" waits that long regardless. Count answers a payload N with N messages; Drip
// sends one message and then nothing; Bidi echoes every message until the
// client closes its side.
func echoDesc(d *echoDeadlines) *grpc.ServiceDesc {
	unary := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in []byte
		if err := dec(&in); err != nil {
			return nil, err
		}
		d.record(ctx, string(in))
		if s, ok := strings.CutPrefix(string(in), "block:"); ok {
			dur, _ := time.ParseDuration(s)
			time.Sleep(dur) // deaf to the deadline: only the gateway can end the call in time
		}
		if s, ok := strings.CutPrefix(string(in), "sleep:"); ok {
			dur, _ := time.ParseDuration(s)
			select {
			case <-time.After(dur):
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-echo-trailer", "t-"+string(in)))
		out := append([]byte("echo:"), in...)
		return &out, nil
	}
	m := func(name string) grpc.MethodDesc { return grpc.MethodDesc{MethodName: name, Handler: unary} }
	return &grpc.ServiceDesc{
		ServiceName: "sluice.test.Echo",
		HandlerType: (*echoServer)(nil),
		Methods:     []grpc.MethodDesc{m("Unary"), m("Slow"), m("Limited"), m("Shed"), m("Broken"), m("Tight")},
		Streams: []grpc.StreamDesc{
			{StreamName: "Count", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				var in []byte
				if err := st.RecvMsg(&in); err != nil {
					return err
				}
				n, err := strconv.Atoi(string(in))
				if err != nil {
					return status.Error(codes.InvalidArgument, "not a number")
				}
				for i := range n {
					out := []byte(strconv.Itoa(i))
					if err := st.SendMsg(&out); err != nil {
						return err
					}
				}
				st.SetTrailer(metadata.Pairs("x-count", strconv.Itoa(n)))
				return nil
			}},
			{StreamName: "Drip", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				var in []byte
				if err := st.RecvMsg(&in); err != nil {
					return err
				}
				out := []byte("first")
				if err := st.SendMsg(&out); err != nil {
					return err
				}
				time.Sleep(time.Second) // the rest never comes, deadline or not
				return nil
			}},
			{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				for {
					var in []byte
					if err := st.RecvMsg(&in); errors.Is(err, io.EOF) {
						st.SetTrailer(metadata.Pairs("x-bidi", "done"))
						return nil
					} else if err != nil {
						return err
					}
					out := append([]byte("bidi:"), in...)
					if err := st.SendMsg(&out); err != nil {
						return err
					}
				}
			}},
		},
	}
}

// grpcUpstream serves the echo service on loopback: cleartext (h2c) when
// cert is nil, TLS otherwise.
func grpcUpstream(tb testing.TB, cert *tls.Certificate) (string, *echoDeadlines) {
	tb.Helper()
	d := &echoDeadlines{left: map[string]time.Duration{}}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})))
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(echoDesc(d), struct{}{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	tb.Cleanup(s.Stop)
	return l.Addr().String(), d
}

// grpcRules routes the echo service to target (with upstream's protocol
// and tls lines), with a 300ms route for Slow, a limit of one call a minute
// on Limited and a degrade plan shedding every call to Shed.
//
// Broken goes to dead, a port nothing listens on, behind a breaker that
// opens on the first failure; Tight has such a breaker too.
func grpcRules(target, dead, upstreamExtra string) string {
	up := fmt.Sprintf("{targets: [{url: %q}]%s}", target, upstreamExtra)
	return fmt.Sprintf(`namespace: grpc
routes:
  - id: slow
    match: {path: /sluice.test.Echo/Slow}
    upstream: {targets: [{url: %[1]q}], timeout: 300ms%[2]s}
  - id: drip
    match: {path: /sluice.test.Echo/Drip}
    upstream: {targets: [{url: %[1]q}], timeout: 300ms%[2]s}
  - id: broken
    match: {path: /sluice.test.Echo/Broken}
    upstream: {targets: [{url: %[4]q}]%[2]s}
  - id: tight
    match: {path: /sluice.test.Echo/Tight}
    upstream: %[3]s
  - id: limited
    match: {path: /sluice.test.Echo/Limited}
    upstream: %[3]s
  - id: shed
    match: {path: /sluice.test.Echo/Shed}
    upstream: %[3]s
  - id: echo
    match: {pathPrefix: /sluice.test.Echo/}
    upstream: %[3]s
limits:
  - {id: one-a-minute, routes: [limited], key: [global], algorithm: token_bucket, rate: 1, period: 1m}
breakers:
  - {id: broken-upstream, routes: [broken], window: 10s, consecutiveFailures: 1, openFor: 1m}
  - {id: tight-upstream, routes: [tight], window: 10s, consecutiveFailures: 1, openFor: 1m}
degrades:
  - {id: shed-all, routes: [shed], mode: manual, level: 2}
`, target, upstreamExtra, up, dead)
}

var rawCall = grpc.CallContentSubtype("raw")

func invoke(ctx context.Context, cc *grpc.ClientConn, method, payload string, opts ...grpc.CallOption) (string, error) {
	in, out := []byte(payload), []byte(nil)
	err := cc.Invoke(ctx, "/sluice.test.Echo/"+method, &in, &out, append(opts, rawCall)...)
	return string(out), err
}

// TestGRPCThroughGateway runs unary, server-streaming and bidirectional
// calls through the gateway, from a grpc-go client to a grpc-go server,
// over h2c on both sides and over TLS on both sides (the upstream verified
// against upstream.tls's CA under its serverName), and checks the
// gateway's own answers: a limit is RESOURCE_EXHAUSTED, a degrade
// UNAVAILABLE, no route UNIMPLEMENTED, and a deadline, the client's or the
// route's, DEADLINE_EXCEEDED, with the upstream told the shorter one.
func TestGRPCThroughGateway(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "grpc test CA")
	tests := []struct {
		desc string
		tls  bool
	}{
		{"h2c client, h2c upstream", false},
		{"TLS client, TLS h2 upstream", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var cfg Config
			var rules string
			var creds credentials.TransportCredentials
			var upstream *echoDeadlines
			if tt.tls {
				leaf := ca.Leaf(t, time.Time{}, time.Time{}, "echo.grpc.test").TLSCertificate(t)
				addr, d := grpcUpstream(t, &leaf)
				upstream = d
				pem := strings.ReplaceAll(strings.TrimSpace(string(ca.PEM())), "\n", `\n`)
				rules = grpcRules("https://"+addr, "https://"+deadAddr(t), fmt.Sprintf(`, protocol: h2, tls: {serverName: echo.grpc.test, ca: "%s"}`, pem))
				dir := t.TempDir()
				cfg.ListenTLS, cfg.TLSCertFile, cfg.TLSKeyFile = "127.0.0.1:0", filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
				ca.Leaf(t, time.Time{}, time.Time{}, "127.0.0.1").Write(t, cfg.TLSCertFile, cfg.TLSKeyFile)
				creds = credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
			} else {
				addr, d := grpcUpstream(t, nil)
				upstream = d
				rules = grpcRules("http://"+addr, "http://"+deadAddr(t), ", protocol: h2c")
				creds = insecure.NewCredentials()
			}
			_, ls := MustStartListeners(t, rules, cfg)
			target := ls.Traffic.Addr().String()
			if tt.tls {
				target = ls.TLSAddr().String()
			}
			cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			// Unary, with its trailer intact.
			var trailer metadata.MD
			out, err := invoke(ctx, cc, "Unary", "hello", grpc.Trailer(&trailer))
			if err != nil || out != "echo:hello" {
				t.Fatalf("unary: %q, %v", out, err)
			}
			if got := trailer.Get("x-echo-trailer"); len(got) != 1 || got[0] != "t-hello" {
				t.Fatalf("unary trailer %v", trailer)
			}

			// Server streaming.
			st, err := cc.NewStream(ctx, &echoDesc(nil).Streams[0], "/sluice.test.Echo/Count", rawCall)
			if err != nil {
				t.Fatal(err)
			}
			n := []byte("5")
			if err := st.SendMsg(&n); err != nil {
				t.Fatal(err)
			}
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				var m []byte
				if err := st.RecvMsg(&m); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("count: %v", err)
				}
				got = append(got, string(m))
			}
			if strings.Join(got, ",") != "0,1,2,3,4" || st.Trailer().Get("x-count")[0] != "5" {
				t.Fatalf("count: %v, trailer %v", got, st.Trailer())
			}

			// Bidirectional: each answer arrives before the next message
			// is sent, so nothing is buffered whole on the way.
			bs, err := cc.NewStream(ctx, &echoDesc(nil).Streams[2], "/sluice.test.Echo/Bidi", rawCall)
			if err != nil {
				t.Fatal(err)
			}
			for _, word := range []string{"a", "b", "c"} {
				m := []byte(word)
				if err := bs.SendMsg(&m); err != nil {
					t.Fatal(err)
				}
				var r []byte
				if err := bs.RecvMsg(&r); err != nil || string(r) != "bidi:"+word {
					t.Fatalf("bidi %s: %q, %v", word, r, err)
				}
			}
			if err := bs.CloseSend(); err != nil {
				t.Fatal(err)
			}
			var r []byte
			if err := bs.RecvMsg(&r); !errors.Is(err, io.EOF) || bs.Trailer().Get("x-bidi")[0] != "done" {
				t.Fatalf("bidi end: %v, trailer %v", err, bs.Trailer())
			}

			// The client's deadline reaches the upstream (as grpc-timeout)
			// and ends the call.
			dctx, dcancel := context.WithTimeout(ctx, 400*time.Millisecond)
			_, err = invoke(dctx, cc, "Unary", "sleep:5s")
			dcancel()
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("client deadline: %v", err)
			}
			if left, ok := upstream.get("sleep:5s"); !ok || left <= 0 || left > 400*time.Millisecond {
				t.Fatalf("upstream saw deadline %v (%v), want in (0, 400ms]", left, ok)
			}

			// No client deadline: the route's 300ms timeout bounds the call,
			// the upstream is told it, and the gateway answers
			// DEADLINE_EXCEEDED itself.
			start := time.Now()
			_, err = invoke(ctx, cc, "Slow", "block:1s")
			if s := status.Convert(err); s.Code() != codes.DeadlineExceeded || !strings.Contains(s.Message(), "did not answer within 300ms") {
				t.Fatalf("route timeout: %v", err)
			}
			if el := time.Since(start); el > 900*time.Millisecond {
				t.Fatalf("route timeout took %v", el)
			}
			if left, ok := upstream.get("block:1s"); !ok || left <= 0 || left > 300*time.Millisecond {
				t.Fatalf("upstream saw deadline %v (%v), want in (0, 300ms]", left, ok)
			}

			// A stream the route's timeout cuts off mid-body ends with
			// DEADLINE_EXCEEDED in trailers, after what did arrive.
			ds, err := cc.NewStream(ctx, &echoDesc(nil).Streams[1], "/sluice.test.Echo/Drip", rawCall)
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.SendMsg(&n); err != nil {
				t.Fatal(err)
			}
			_ = ds.CloseSend()
			var first []byte
			if err := ds.RecvMsg(&first); err != nil || string(first) != "first" {
				t.Fatalf("drip first: %q, %v", first, err)
			}
			err = ds.RecvMsg(&first)
			if s := status.Convert(err); s.Code() != codes.DeadlineExceeded || !strings.Contains(s.Message(), "did not finish within the deadline") {
				t.Fatalf("drip cut off: %v", err)
			}

			// An unreachable upstream is UNAVAILABLE; the breaker it opens
			// answers UNAVAILABLE naming its rule.
			_, err = invoke(ctx, cc, "Broken", "x")
			if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "could not be reached") {
				t.Fatalf("broken: %v", err)
			}
			_, err = invoke(ctx, cc, "Broken", "x")
			if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), `breaker "broken-upstream" is open`) {
				t.Fatalf("broken, breaker open: %v", err)
			}

			// Calls that run out of their clients' own short deadlines are no
			// failures of the upstream: Tight's breaker stays closed.
			for range 3 {
				tctx, tcancel := context.WithTimeout(ctx, 150*time.Millisecond)
				_, err = invoke(tctx, cc, "Tight", "block:600ms")
				tcancel()
				if s := status.Convert(err); s.Code() != codes.DeadlineExceeded ||
					s.Message() != "context deadline exceeded" && !strings.Contains(s.Message(), "within the client's deadline") {
					t.Fatalf("tight: %v", err) // the client's own end, or the gateway's
				}
			}
			if out, err := invoke(ctx, cc, "Tight", "x"); err != nil || out != "echo:x" {
				t.Fatalf("after client deadlines: %q, %v (the breaker counted them)", out, err)
			}

			// A limit rejection is RESOURCE_EXHAUSTED naming the rule.
			if _, err := invoke(ctx, cc, "Limited", "one"); err != nil {
				t.Fatalf("first limited call: %v", err)
			}
			var hdr metadata.MD // a Trailers-Only answer: its header is the trailer
			_, err = invoke(ctx, cc, "Limited", "two", grpc.Trailer(&hdr))
			if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), `limit "one-a-minute"`) {
				t.Fatalf("limited: %v", err)
			}
			if len(hdr.Get("retry-after")) != 1 || len(hdr.Get("x-request-id")) != 1 || len(hdr.Get("grpc-retry-pushback-ms")) != 1 {
				t.Fatalf("rejection metadata %v", hdr)
			}

			// A degrade is UNAVAILABLE naming the rule.
			_, err = invoke(ctx, cc, "Shed", "x")
			if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), `degrade "shed-all"`) {
				t.Fatalf("shed: %v", err)
			}

			// No route is UNIMPLEMENTED.
			in, o := []byte("x"), []byte(nil)
			err = cc.Invoke(ctx, "/other.Service/Call", &in, &o, rawCall)
			if s := status.Convert(err); s.Code() != codes.Unimplemented || !strings.Contains(s.Message(), "no route") {
				t.Fatalf("no route: %v", err)
			}
		})
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
