package sluicegrpc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicegw/sluice/dataplane/sdk"
	"github.com/sluicegw/sluice/dataplane/sdk/sluicegrpc"
)

// A gRPC server's Health/Check method is limited to one call an hour: the
// client's second call fails with RESOURCE_EXHAUSTED naming the rule.
func Example() {
	dir, _ := os.MkdirTemp("", "sluicegrpc-example")
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.yaml")
	_ = os.WriteFile(rules, []byte(`namespace: orders-svc
kind: service
limits:
  - {id: checks, resources: [/grpc.health.v1.Health/Check], algorithm: token_bucket, rate: 1, period: 1h}
`), 0o600)
	g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", RulesFile: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(sluicegrpc.UnaryServerInterceptor(g)),
		grpc.ChainStreamInterceptor(sluicegrpc.StreamServerInterceptor(g)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Stop()

	conn, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	for range 2 {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			fmt.Println(status.Code(err), status.Convert(err).Message())
			continue
		}
		fmt.Println("OK")
	}
	// Output:
	// OK
	// ResourceExhausted limit "checks" refused the call; retry after 3600 s
}
