// Command grpcbench is the gRPC upstream and checker of the dedicated-core
// benchmark (scripts/bench-dedicated.sh); it is not built by make build.
//
//	grpcbench serve --listen 127.0.0.1:18100
//	grpcbench check --addr 127.0.0.1:18101 [--n 100]
//
// serve answers the standard health service (grpc.health.v1.Health/Check:
// SERVING) over cleartext HTTP/2, so that no generated code is needed and a
// request body is five bytes (an empty HealthCheckRequest in a gRPC frame),
// which h2load sends as the benchmark's unary call. check makes n such calls
// with grpc-go through a proxy and fails unless every one returns status OK
// and SERVING: h2load counts HTTP 200s, and a gRPC error is a 200 with a
// grpc-status trailer, so the benchmark checks each proxy with this first.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcbench serve --listen ADDR | check --addr ADDR [--n N]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	switch os.Args[1] {
	case "serve":
		listen := fs.String("listen", "127.0.0.1:18100", "address to serve gRPC (h2c) on")
		_ = fs.Parse(os.Args[2:])
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			log.Fatal(err)
		}
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer()) // answers SERVING for ""
		log.Fatal(s.Serve(ln))
	case "check":
		addr := fs.String("addr", "", "proxy address (h2c)")
		n := fs.Int("n", 100, "calls to make")
		_ = fs.Parse(os.Args[2:])
		if err := check(*addr, *n); err != nil {
			fmt.Fprintf(os.Stderr, "grpcbench check %s: %v\n", *addr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "grpcbench: unknown command %q (serve or check)\n", os.Args[1])
		os.Exit(2)
	}
}

func check(addr string, n int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err != nil {
			return fmt.Errorf("call %d: %w", i+1, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("call %d: status %v, want SERVING", i+1, resp.GetStatus())
		}
	}
	return nil
}
