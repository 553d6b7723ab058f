// Command orders is an example service guarded by the in-service SDK
// (package dataplane/sdk): POST /api/orders is limited per client by
// sluicehttp.Middleware, and inside it the database insert and the queue
// publish are guarded separately with Guard.Do (a concurrency limit and a
// breaker on the database, a per-user limit and a degrade plan on the
// queue); a gRPC health service is guarded by sluicegrpc's interceptors.
// The database and the queue are in-memory stand-ins.
//
//	go run ./sdk/example/orders --rules sdk/example/orders/rules.yaml
//	curl -X POST -H 'X-User: alice' localhost:8090/api/orders
//
// With --etcd (and --trust-keys) it follows the rule set published to
// --namespace, registers as a kind: sdk node (--service names it) and
// reports its guarded calls as a gateway node does (--report-interval), so
// that the console's Nodes, live traffic and canary analysis cover it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicegw/sluice/dataplane/sdk"
	"github.com/sluicegw/sluice/dataplane/sdk/sluicegrpc"
	"github.com/sluicegw/sluice/dataplane/sdk/sluicehttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends; ready, when set, receives the HTTP and gRPC
// addresses once both listen.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- [2]string) error {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rules := fs.String("rules", "", "rules file (kind: service)")
	etcd := fs.String("etcd", "", "etcd endpoints, comma-separated (instead of --rules)")
	trust := fs.String("trust-keys", "", "PEM files of the control plane's signing keys")
	unsigned := fs.Bool("insecure-accept-unsigned", false, "accept unsigned etcd values (development)")
	ns := fs.String("namespace", "orders-svc", "namespace of the service's rule set")
	nodeID := fs.String("node-id", "", "this instance's id (default: host name)")
	service := fs.String("service", "orders", "the service's name in its registration (the Nodes page shows it)")
	reportEvery := fs.Duration("report-interval", 0, "time between two node reports with --etcd (0: 5s; negative: none)")
	stateDir := fs.String("state-dir", "", "cache of applied rule sets, to boot from while etcd is down")
	redis := fs.String("redis", "", "Redis URL for scope: cluster limits")
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address")
	grpcListen := fs.String("grpc-listen", "127.0.0.1:8091", "gRPC address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := sdk.Config{Namespace: *ns, NodeID: *nodeID, Service: *service, ReportInterval: *reportEvery, RulesFile: *rules, TrustKeys: *trust, InsecureAcceptUnsigned: *unsigned,
		StateDir: *stateDir, Redis: *redis, Address: *listen, Logger: log}
	if *etcd != "" {
		cfg.Etcd = strings.Split(*etcd, ",")
	}
	g, err := sdk.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer g.Close()

	hl, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", *grpcListen)
	if err != nil {
		hl.Close()
		return err
	}
	svc := &orders{g: g, db: &fakeDB{}, queue: &fakeQueue{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/orders", svc.create)
	hs := &http.Server{Handler: sluicehttp.Middleware(g, mux), ReadHeaderTimeout: 5 * time.Second}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(sluicegrpc.UnaryServerInterceptor(g)),
		grpc.ChainStreamInterceptor(sluicegrpc.StreamServerInterceptor(g)))
	healthpb.RegisterHealthServer(gs, health.NewServer())

	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(hl) }()
	go func() { errc <- gs.Serve(gl) }()
	if ready != nil {
		ready <- [2]string{hl.Addr().String(), gl.Addr().String()}
	}
	log.Info("orders: serving", "http", hl.Addr().String(), "grpc", gl.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	gs.GracefulStop()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// orders is the service: each order is a database insert and a queue
// publish, guarded separately.
type orders struct {
	g     *sdk.Guard
	db    *fakeDB
	queue *fakeQueue
}

func (o *orders) create(w http.ResponseWriter, r *http.Request) {
	user := r.Header.Get("X-User")
	var id int64
	err := o.g.Do(r.Context(), "db.InsertOrder", nil, func(ctx context.Context) error {
		var err error
		id, err = o.db.insert(ctx, user)
		return err
	})
	if err == nil {
		err = o.g.Do(r.Context(), "queue.PublishOrder", sdk.Keys{"user": user}, func(ctx context.Context) error {
			return o.queue.publish(ctx, id)
		})
	}
	var rej *sdk.Rejected
	switch {
	case errors.As(err, &rej):
		w.Header().Set("Retry-After", fmt.Sprint(int64(rej.RetryAfter/time.Second)))
		http.Error(w, fmt.Sprintf("busy: %s %s refused the order", rej.Kind, rej.Rule), rej.Status)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d\n", id)
	}
}

// fakeDB and fakeQueue stand in for a database and a message queue.
type fakeDB struct{ seq atomic.Int64 }

func (d *fakeDB) insert(ctx context.Context, user string) (int64, error) {
	if user == "" {
		return 0, errors.New("no user")
	}
	return d.seq.Add(1), ctx.Err()
}

type fakeQueue struct{ published atomic.Int64 }

func (q *fakeQueue) publish(ctx context.Context, id int64) error {
	q.published.Add(1)
	return ctx.Err()
}
