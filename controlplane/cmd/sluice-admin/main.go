// Command sluice-admin is the Sluice control plane: the admin REST API and
// console over versioned, reviewed rule sets in Postgres, and the publisher
// that projects each approved version into etcd.
//
//	sluice-admin [serve] [flags]   run the API and the publisher (migrates first)
//	sluice-admin migrate [flags]   apply database migrations and exit
//
// Every flag can also be set by an environment variable, shown in -help;
// a flag given on the command line wins. The bootstrap admin's password is
// read from SLUICE_BOOTSTRAP_ADMIN_PASSWORD only (never a flag, so it stays
// out of process listings); without it, a random one is generated and
// printed once to stderr when the admin is created.
//
// With --embedded-etcd DIR it also runs a single-member etcd in-process
// (127.0.0.1:2379 by default), for the one-machine dev stack.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicegw/sluice/api"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
)

// Config is every setting of sluice-admin.
type Config struct {
	DatabaseURL         string
	DatabaseWait        time.Duration
	EtcdEndpoints       string
	EtcdPrefix          string
	EmbeddedEtcd        string
	EmbeddedEtcdPeer    string
	Listen              string
	BootstrapAdmin      string
	WebDir              string
	SecureCookies       bool
	TrustForwardedProto bool
	TrustedProxies      string
	MaxBodyBytes        int64
	PollInterval        time.Duration
	NodeRetention       time.Duration
	LogLevel            string
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok {
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b
		}
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envInt(name string, def int64) int64 {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

func parseFlags(name string, args []string) (*Config, error) {
	var c Config
	fs := flag.NewFlagSet("sluice-admin "+name, flag.ContinueOnError)
	fs.StringVar(&c.DatabaseURL, "database-url", env("SLUICE_DATABASE_URL", "postgres://127.0.0.1:5432/sluice?sslmode=disable"), "Postgres URL ($SLUICE_DATABASE_URL)")
	fs.DurationVar(&c.DatabaseWait, "database-wait", envDuration("SLUICE_DATABASE_WAIT", 30*time.Second), "how long to wait for Postgres at start ($SLUICE_DATABASE_WAIT)")
	fs.StringVar(&c.EtcdEndpoints, "etcd-endpoints", env("SLUICE_ETCD_ENDPOINTS", "127.0.0.1:2379"), "comma-separated etcd endpoints ($SLUICE_ETCD_ENDPOINTS)")
	fs.StringVar(&c.EtcdPrefix, "etcd-prefix", env("SLUICE_ETCD_PREFIX", api.DefaultEtcdPrefix), "root of Sluice's etcd keys ($SLUICE_ETCD_PREFIX)")
	fs.StringVar(&c.EmbeddedEtcd, "embedded-etcd", env("SLUICE_EMBEDDED_ETCD", ""), "run an embedded etcd storing its data in this directory, serving the first --etcd-endpoints address ($SLUICE_EMBEDDED_ETCD)")
	fs.StringVar(&c.EmbeddedEtcdPeer, "embedded-etcd-peer", env("SLUICE_EMBEDDED_ETCD_PEER", "127.0.0.1:2380"), "peer address of the embedded etcd ($SLUICE_EMBEDDED_ETCD_PEER)")
	fs.StringVar(&c.Listen, "listen", env("SLUICE_LISTEN", ":8080"), "admin API and console address ($SLUICE_LISTEN)")
	fs.StringVar(&c.BootstrapAdmin, "bootstrap-admin", env("SLUICE_BOOTSTRAP_ADMIN", "admin"), "name of the admin created when there are no users ($SLUICE_BOOTSTRAP_ADMIN; password from $SLUICE_BOOTSTRAP_ADMIN_PASSWORD)")
	fs.StringVar(&c.WebDir, "web-dir", env("SLUICE_WEB_DIR", ""), "serve the console from this built web/dist instead of the one embedded at build time ($SLUICE_WEB_DIR)")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", envBool("SLUICE_SECURE_COOKIES", false), "always mark the session cookie Secure ($SLUICE_SECURE_COOKIES)")
	fs.BoolVar(&c.TrustForwardedProto, "trust-forwarded-proto", envBool("SLUICE_TRUST_FORWARDED_PROTO", false), "mark the cookie Secure when X-Forwarded-Proto is https ($SLUICE_TRUST_FORWARDED_PROTO)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", env("SLUICE_TRUSTED_PROXIES", ""), "comma-separated CIDRs whose X-Forwarded-For is believed ($SLUICE_TRUSTED_PROXIES)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", envInt("SLUICE_MAX_BODY_BYTES", 4<<20), "request body limit ($SLUICE_MAX_BODY_BYTES)")
	fs.DurationVar(&c.PollInterval, "publish-poll-interval", envDuration("SLUICE_PUBLISH_POLL_INTERVAL", 2*time.Second), "outbox scan interval besides notifications ($SLUICE_PUBLISH_POLL_INTERVAL)")
	fs.DurationVar(&c.NodeRetention, "node-retention", envDuration("SLUICE_NODE_RETENTION", 24*time.Hour), "how long gone gateway nodes are listed ($SLUICE_NODE_RETENTION)")
	fs.StringVar(&c.LogLevel, "log-level", env("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error ($SLUICE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return &c, nil
}

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd != "serve" && cmd != "migrate" {
		fmt.Fprintf(os.Stderr, "sluice-admin: unknown command %q (serve, migrate)\n", cmd)
		os.Exit(2)
	}
	cfg, err := parseFlags(cmd, args)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-admin:", err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-admin: --log-level:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cmd == "migrate" {
		err = migrate(ctx, cfg, logger)
	} else {
		err = serve(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("sluice-admin failed", "err", err)
		os.Exit(1)
	}
}

// openDB connects to Postgres, waiting up to cfg.DatabaseWait for it.
func openDB(ctx context.Context, cfg *Config, s postgres.Settings, logger *slog.Logger) (*postgres.DB, error) {
	deadline := time.Now().Add(cfg.DatabaseWait)
	for {
		db, err := postgres.Open(ctx, cfg.DatabaseURL, s)
		if err == nil {
			return db, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connecting to Postgres: %w", err)
		}
		logger.Warn("waiting for Postgres", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func migrate(ctx context.Context, cfg *Config, logger *slog.Logger) error {
	db, err := openDB(ctx, cfg, postgres.Settings{Logger: logger}, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	logger.Info("migrations applied")
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func serve(ctx context.Context, cfg *Config, logger *slog.Logger) error {
	endpoints := splitList(cfg.EtcdEndpoints)
	if len(endpoints) == 0 {
		return errors.New("--etcd-endpoints is empty")
	}
	if cfg.EmbeddedEtcd != "" {
		host := strings.TrimPrefix(strings.TrimPrefix(endpoints[0], "http://"), "https://")
		e, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{Dir: cfg.EmbeddedEtcd, ClientURL: "http://" + host, PeerURL: "http://" + cfg.EmbeddedEtcdPeer})
		if err != nil {
			return err
		}
		defer e.Close()
		logger.Info("embedded etcd started", "client", host, "dir", cfg.EmbeddedEtcd)
	}

	var publisher *etcd.Publisher
	db, err := openDB(ctx, cfg, postgres.Settings{Logger: logger, OnPublish: func(string) { publisher.Wake() }}, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	users := postgres.NewUserService(db)
	if err := bootstrapAdmin(ctx, users, cfg.BootstrapAdmin); err != nil {
		return err
	}

	client, err := etcd.NewClient(endpoints)
	if err != nil {
		return err
	}
	defer client.Close()
	keys := api.Keys{Prefix: cfg.EtcdPrefix}

	versions := postgres.NewVersionService(db)
	outbox := postgres.NewOutbox(db)
	namespaces := postgres.NewNamespaceService(db)
	audit := postgres.NewAuditService(db)
	history := postgres.NewNodeHistory(db)
	srv, err := sluicehttp.New(sluicehttp.Settings{
		Namespaces: namespaces,
		Drafts:     postgres.NewDraftService(db),
		Changes:    postgres.NewChangeService(db),
		Versions:   versions,
		Users:      users,
		Sessions:   postgres.NewSessionService(db),
		Tokens:     postgres.NewTokenService(db),
		Audit:      audit,
		Outbox:     outbox,
		Nodes: &etcd.NodeService{Client: client, Keys: keys, History: history, Audit: audit,
			Retention: cfg.NodeRetention, Logger: logger},
		Canaries: postgres.NewCanaryService(db),
		Ready: map[string]func(context.Context) error{
			"database": db.Ping,
			"etcd":     func(ctx context.Context) error { return etcd.Ping(ctx, client) },
		},
		Logger:              logger,
		MaxBodyBytes:        cfg.MaxBodyBytes,
		SecureCookies:       cfg.SecureCookies,
		TrustForwardedProto: cfg.TrustForwardedProto,
		TrustedProxies:      splitList(cfg.TrustedProxies),
		WebDir:              cfg.WebDir,
	})
	if err != nil {
		return err
	}
	publisher = etcd.NewPublisher(etcd.Settings{Client: client, Outbox: outbox, Keys: keys, Logger: logger,
		PollInterval: cfg.PollInterval, Observe: srv.ObservePublish})
	watcher := etcd.NewNodeWatcher(etcd.WatcherSettings{Client: client, History: history, Keys: keys, Logger: logger,
		Namespaces: func(ctx context.Context) ([]string, error) {
			nss, err := namespaces.FindNamespaces(ctx)
			names := make([]string, len(nss))
			for i, ns := range nss {
				names[i] = ns.Name
			}
			return names, err
		}})
	return run(ctx, cfg, logger, db, client, publisher, watcher, srv)
}

// run serves until ctx ends, then shuts down in order: stop accepting
// requests and finish those in flight, stop the publisher (a write in
// progress finishes or stays pending) and the node watcher, stop listening
// for notifications.
func run(ctx context.Context, cfg *Config, logger *slog.Logger, db *postgres.DB, client *clientv3.Client, publisher *etcd.Publisher,
	watcher *etcd.NodeWatcher, srv *sluicehttp.Server) error {
	bg, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	publisher.Start(bg)
	watcher.Start(bg)
	wg.Add(1)
	go func() {
		defer wg.Done()
		db.Listen(bg, func(string) { publisher.Wake() })
	}()
	hs := &http.Server{Addr: cfg.Listen, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	logger.Info("sluice-admin serving", "listen", cfg.Listen)
	var err error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-errc:
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if serr := hs.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	publisher.Close()
	watcher.Close()
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// bootstrapAdmin creates the first admin when there are no users. A
// generated password is printed to stderr, once, and nowhere else.
func bootstrapAdmin(ctx context.Context, users sluice.UserService, name string) error {
	password := os.Getenv("SLUICE_BOOTSTRAP_ADMIN_PASSWORD")
	generated := password == ""
	if generated {
		var err error
		if password, err = postgres.GeneratePassword(); err != nil {
			return err
		}
	}
	created, err := users.EnsureBootstrapAdmin(ctx, name, password)
	if err != nil {
		return err
	}
	if created && generated {
		fmt.Fprintf(os.Stderr, "\n  sluice-admin: created the admin user %q with the password\n\n      %s\n\n  It is shown only this once. Log in and change it.\n\n", name, password)
	}
	return nil
}
