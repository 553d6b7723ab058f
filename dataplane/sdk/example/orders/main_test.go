package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestOrders runs the example service on its own rules file: orders are
// created until the user's queue-publish limit refuses one (the component
// layer inside the HTTP route), another user is unaffected, and the gRPC
// health method answers through the interceptors.
func TestOrders(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--rules", "rules.yaml", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"}, io.Discard, ready)
	}()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening")
	}
	post := func(user string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addrs[0]+"/api/orders", nil)
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 5 {
		if code, body := post("alice"); code != http.StatusCreated {
			t.Fatalf("order %d: %d %s", i, code, body)
		}
	}
	if code, body := post("alice"); code != http.StatusTooManyRequests || !strings.Contains(body, "publishes-per-user") {
		t.Fatalf("sixth order: %d %s", code, body)
	}
	if code, body := post("bob"); code != http.StatusCreated {
		t.Fatalf("bob: %d %s", code, body)
	}
	conn, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
