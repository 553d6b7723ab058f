package sluicegrpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicegw/sluice/dataplane/sdk"
)

const rules = `namespace: orders-svc
kind: service
limits:
  - {id: checks, resources: [/grpc.health.v1.Health/Check], key: [sdk:tenant], algorithm: token_bucket, rate: 1, period: 1h}
  - {id: watchers, resources: [/grpc.health.v1.Health/Watch], algorithm: concurrency, rate: 1}
`

// serve starts a real grpc-go server with both interceptors over g, keyed
// on the "tenant" metadata, and a client connected to it.
func serve(t *testing.T) (*sdk.Guard, healthpb.HealthClient) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", RulesFile: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	tenant := WithKeys(func(ctx context.Context, _ string) sdk.Keys {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("tenant"); len(v) > 0 {
			return sdk.Keys{"tenant": v[0]}
		}
		return nil
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(UnaryServerInterceptor(g, tenant)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(g, tenant)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return g, healthpb.NewHealthClient(conn)
}

func tenantCtx(t *testing.T, tenant string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "tenant", tenant)
}

// TestUnary: the full method name is the resource; a refused call fails
// with RESOURCE_EXHAUSTED naming the limit; keys from metadata keep tenants
// apart; a drain answers UNAVAILABLE.
func TestUnary(t *testing.T) {
	t.Parallel()
	g, c := serve(t)
	if _, err := c.Check(tenantCtx(t, "a"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Check(tenantCtx(t, "a"), &healthpb.HealthCheckRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), `limit "checks"`) {
		t.Fatalf("second call: %v", err)
	}
	if _, err := c.Check(tenantCtx(t, "b"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	g.Drain(true)
	_, err = c.Check(tenantCtx(t, "c"), &healthpb.HealthCheckRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "drained") {
		t.Fatalf("drained: %v", err)
	}
}

// TestStream: a stream holds its concurrency slot for its life: a second
// Watch is refused with RESOURCE_EXHAUSTED naming the limit, and one opened
// after the first ends is admitted.
func TestStream(t *testing.T) {
	t.Parallel()
	_, c := serve(t)
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	w1, err := c.Watch(ctx1, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Recv(); err != nil {
		t.Fatal(err)
	}
	w2, err := c.Watch(tenantCtx(t, "x"), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w2.Recv()
	}
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), `limit "watchers"`) {
		t.Fatalf("second stream: %v", err)
	}
	cancel1()
	// The server sees the first stream end on its own schedule: poll for
	// the slot coming back (an event, not a time window).
	deadline := time.Now().Add(10 * time.Second)
	for {
		w3, err := c.Watch(tenantCtx(t, "x"), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w3.Recv()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot never came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailure: the caller's faults are not failures of the method.
func TestFailure(t *testing.T) {
	t.Parallel()
	if failure(status.Error(codes.InvalidArgument, "x")) != nil || failure(status.Error(codes.NotFound, "x")) != nil {
		t.Fatal("a caller's fault counted as a failure")
	}
	if failure(status.Error(codes.Internal, "x")) == nil || failure(errors.New("plain")) == nil {
		t.Fatal("a server failure not counted")
	}
}
