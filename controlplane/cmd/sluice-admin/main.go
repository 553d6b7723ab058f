// Command sluice-admin is the Sluice control plane: the admin REST API and
// console over versioned, reviewed rule sets in Postgres, and the publisher
// that projects each approved version into etcd.
//
//	sluice-admin [serve] [flags]   run the API and the publisher (migrates first)
//	sluice-admin migrate [flags]   apply database migrations and exit
//	sluice-admin keygen [--if-missing] --private FILE --public FILE
//	                               write a new Ed25519 signing key pair
//
// Every value the publisher writes to etcd is signed with --signing-key
// (see api.Signer); gateway nodes verify it with the public key (their
// --trust-keys). serve refuses to start without a signing key unless
// --insecure-publish-unsigned is given.
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
	"crypto/ed25519"
	"crypto/rand"
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
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/etcd"
	sluicehttp "github.com/sluicegw/sluice/controlplane/http"
	"github.com/sluicegw/sluice/controlplane/postgres"
	"github.com/sluicegw/sluice/dataplane/tracing"
)

// Config is every setting of sluice-admin.
type Config struct {
	DatabaseURL         string
	DatabaseWait        time.Duration
	AuditKeyFile        string
	InsecureNoAuditKey  bool
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
	// EventRetention is how long events are kept in Postgres.
	EventRetention time.Duration
	// SessionIdle ends a console session unused for this long; each use
	// extends it, up to SessionMaxAge after sign-in.
	SessionIdle, SessionMaxAge time.Duration
	LogLevel                   string
	// SigningKeys are PKCS#8 PEM files; the first key of the first file
	// signs, the others are recognised (key rotation).
	SigningKeys      []string
	InsecureUnsigned bool
	// Etcd TLS and auth.
	EtcdCA, EtcdCert, EtcdKey string
	EtcdUsername              string
	EtcdPassword              string
	EtcdPasswordFile          string
	// MaxConnections caps the admin API's open connections; zero derives
	// it from the open-file limit (maxConnsFor).
	MaxConnections int
	// Streams bounds the event streams.
	Streams sluicehttp.StreamSettings
	// Tracing is --otlp-endpoint and --otlp-sample-ratio: spans per API
	// request and per publication.
	Tracing tracing.Config
}

// listFlag is a flag that may be repeated, each value a comma list.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	*l.v = append(*l.v, splitList(s)...)
	return nil
}

// envName is the environment variable of flag f: SLUICE_ and the flag's
// name in upper case with dashes as underscores, except where the variable
// names what the flag holds (SLUICE_SIGNING_KEY_FILE for --signing-key).
func envName(f *flag.Flag) string {
	if f.Name == "signing-key" {
		return "SLUICE_SIGNING_KEY_FILE"
	}
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
}

// setFromEnv sets every flag of fs whose variable is set, before the command
// line is parsed (so that a flag given there wins), the gateway's way. A
// malformed value is an error naming the variable and the value.
func setFromEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f)
		if f.Name == "signing-key" || err != nil {
			return // a list the command line replaces, not extends: read after Parse
		}
		if v, ok := os.LookupEnv(name); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("invalid value %q for environment %s: %w", v, name, serr)
			}
		}
	})
	return err
}

func parseFlags(name string, args []string) (*Config, error) {
	var c Config
	fs := flag.NewFlagSet("sluice-admin "+name, flag.ContinueOnError)
	fs.StringVar(&c.DatabaseURL, "database-url", "postgres://127.0.0.1:5432/sluice?sslmode=disable", "Postgres URL ($SLUICE_DATABASE_URL)")
	fs.DurationVar(&c.DatabaseWait, "database-wait", 30*time.Second, "how long to wait for Postgres at start ($SLUICE_DATABASE_WAIT)")
	fs.StringVar(&c.EtcdEndpoints, "etcd-endpoints", "127.0.0.1:2379", "comma-separated etcd endpoints ($SLUICE_ETCD_ENDPOINTS)")
	fs.StringVar(&c.EtcdPrefix, "etcd-prefix", api.DefaultEtcdPrefix, "root of Sluice's etcd keys ($SLUICE_ETCD_PREFIX)")
	fs.StringVar(&c.EmbeddedEtcd, "embedded-etcd", "", "run an embedded etcd storing its data in this directory, serving the first --etcd-endpoints address ($SLUICE_EMBEDDED_ETCD)")
	fs.StringVar(&c.EmbeddedEtcdPeer, "embedded-etcd-peer", "127.0.0.1:2380", "peer address of the embedded etcd ($SLUICE_EMBEDDED_ETCD_PEER)")
	fs.StringVar(&c.Listen, "listen", ":8080", "admin API and console address ($SLUICE_LISTEN)")
	fs.StringVar(&c.BootstrapAdmin, "bootstrap-admin", "admin", "name of the admin created when there are no users ($SLUICE_BOOTSTRAP_ADMIN; password from $SLUICE_BOOTSTRAP_ADMIN_PASSWORD)")
	fs.StringVar(&c.WebDir, "web-dir", "", "serve the console from this built web/dist instead of the one embedded at build time ($SLUICE_WEB_DIR)")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", false, "always mark the session cookie Secure ($SLUICE_SECURE_COOKIES)")
	fs.BoolVar(&c.TrustForwardedProto, "trust-forwarded-proto", false, "mark the cookie Secure when X-Forwarded-Proto is https ($SLUICE_TRUST_FORWARDED_PROTO)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is believed ($SLUICE_TRUSTED_PROXIES)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 4<<20, "request body limit ($SLUICE_MAX_BODY_BYTES)")
	fs.DurationVar(&c.PollInterval, "publish-poll-interval", 2*time.Second, "outbox scan interval besides notifications ($SLUICE_PUBLISH_POLL_INTERVAL)")
	fs.DurationVar(&c.NodeRetention, "node-retention", 24*time.Hour, "how long gone gateway nodes are listed ($SLUICE_NODE_RETENTION)")
	fs.DurationVar(&c.SessionIdle, "session-idle", 12*time.Hour, "end a console session unused for this long; each request extends it ($SLUICE_SESSION_IDLE)")
	fs.DurationVar(&c.SessionMaxAge, "session-max-age", 7*24*time.Hour, "end every console session this long after sign-in, however active ($SLUICE_SESSION_MAX_AGE)")
	fs.DurationVar(&c.EventRetention, "event-retention", 30*24*time.Hour, "how long events (degrade and breaker transitions, publishes, canaries, overrides, nodes joining and leaving) are kept ($SLUICE_EVENT_RETENTION)")
	fs.StringVar(&c.AuditKeyFile, "audit-key-file", "", "file holding the audit chain's HMAC key, at least 32 bytes; or the key itself in $SLUICE_AUDIT_KEY ($SLUICE_AUDIT_KEY_FILE)")
	fs.BoolVar(&c.InsecureNoAuditKey, "insecure-no-audit-key", false, "start without an audit key: the audit log is then only sha256-chained, which anyone who can write the database can recompute ($SLUICE_INSECURE_NO_AUDIT_KEY)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error ($SLUICE_LOG_LEVEL)")
	fs.Var(listFlag{&c.SigningKeys}, "signing-key", "Ed25519 signing key, PKCS#8 PEM file; repeat it (or give a comma list) to keep older keys recognised during a rotation: the first key signs ($SLUICE_SIGNING_KEY_FILE)")
	fs.BoolVar(&c.InsecureUnsigned, "insecure-publish-unsigned", false, "publish unsigned values when no --signing-key is given; nodes must then run --insecure-accept-unsigned ($SLUICE_INSECURE_PUBLISH_UNSIGNED)")
	fs.StringVar(&c.EtcdCA, "etcd-ca", "", "PEM file of the CA of etcd's server certificates ($SLUICE_ETCD_CA)")
	fs.StringVar(&c.EtcdCert, "etcd-cert", "", "PEM client certificate for etcd ($SLUICE_ETCD_CERT)")
	fs.StringVar(&c.EtcdKey, "etcd-key", "", "PEM key of --etcd-cert ($SLUICE_ETCD_KEY)")
	fs.StringVar(&c.EtcdUsername, "etcd-username", "", "etcd user, with etcd auth enabled ($SLUICE_ETCD_USERNAME; password from --etcd-password-file or $SLUICE_ETCD_PASSWORD)")
	fs.StringVar(&c.EtcdPasswordFile, "etcd-password-file", "", "file holding the etcd user's password ($SLUICE_ETCD_PASSWORD_FILE)")
	fs.IntVar(&c.MaxConnections, "max-connections", 0, "most connections the admin API holds open at once; past it new ones wait (0: half the open-file limit, 16 to 4096, leaving the rest to etcd and Postgres) ($SLUICE_MAX_CONNECTIONS)")
	fs.IntVar(&c.Streams.PerUser, "stream-per-user", 8, "most event streams one user holds open; more are answered 429 ($SLUICE_STREAM_PER_USER)")
	fs.IntVar(&c.Streams.Total, "stream-total", 512, "most event streams open in all; more are answered 429 ($SLUICE_STREAM_TOTAL)")
	fs.DurationVar(&c.Streams.Idle, "stream-idle", 10*time.Minute, "end an event stream that sent nothing but heartbeats for this long; the client reconnects ($SLUICE_STREAM_IDLE)")
	fs.DurationVar(&c.Streams.Lifetime, "stream-lifetime", time.Hour, "end every event stream after this long; the client reconnects with Last-Event-ID ($SLUICE_STREAM_LIFETIME)")
	fs.IntVar(&c.Streams.ReplayMax, "stream-replay-max", 10000, "most missed events a reconnecting stream replays; past it the client is told to reload ($SLUICE_STREAM_REPLAY_MAX)")
	tracing.Flags(fs, &c.Tracing) // $SLUICE_OTLP_ENDPOINT, $SLUICE_OTLP_SAMPLE_RATIO, $SLUICE_OTLP_QUEUE_SIZE too
	c.EtcdPassword = os.Getenv("SLUICE_ETCD_PASSWORD")
	if err := setFromEnv(fs); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if len(c.SigningKeys) == 0 {
		c.SigningKeys = splitList(os.Getenv("SLUICE_SIGNING_KEY_FILE"))
	}
	if c.EtcdPasswordFile != "" {
		b, err := os.ReadFile(c.EtcdPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("reading --etcd-password-file: %w", err)
		}
		c.EtcdPassword = strings.TrimRight(string(b), "\r\n")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"max-connections", c.MaxConnections < 0},
		{"stream-per-user", c.Streams.PerUser < 1},
		{"stream-total", c.Streams.Total < 1},
		{"stream-idle", c.Streams.Idle <= 0},
		{"stream-lifetime", c.Streams.Lifetime <= 0},
		{"session-idle", c.SessionIdle <= 0},
		{"session-max-age", c.SessionMaxAge <= 0},
		{"stream-replay-max", c.Streams.ReplayMax < 1},
	} {
		if f.bad {
			return nil, fmt.Errorf("--%s must be positive", f.name)
		}
	}
	return &c, nil
}

func main() {
	args := os.Args[1:]
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println("sluice-admin", buildinfo.String())
		return
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd == "keygen" {
		if err := keygen(args, os.Stdout); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(0)
			}
			fmt.Fprintln(os.Stderr, "sluice-admin keygen:", err)
			os.Exit(2)
		}
		return
	}
	if cmd != "serve" && cmd != "migrate" {
		fmt.Fprintf(os.Stderr, "sluice-admin: unknown command %q (serve, migrate, keygen)\n", cmd)
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

// Main is sluice-admin serve, in the shape of wtf's cmd/wtfd: Run opens every
// dependency (embedded etcd, Postgres and its migrations, the etcd client),
// starts the publisher, the node watcher, the notification listener and the
// HTTP server, and returns once serving; Err reports the server failing
// while it serves; Close stops everything in order and waits for every
// goroutine Run started. Create it with NewMain.
type Main struct {
	Config *Config
	Logger *slog.Logger

	embedded  *etcd.Embedded
	db        *postgres.DB
	client    *clientv3.Client
	publisher *etcd.Publisher
	watcher   *etcd.NodeWatcher
	scheduler *postgres.Scheduler
	reports   *etcd.ReportWatcher
	feed      *sluice.EventFeed
	pubFeed   *sluice.PublicationFeed
	pruner    *sluice.EventPruner
	analyser  *sluice.CanaryAnalyser
	hs        *http.Server
	ln        net.Listener
	limit     *limitListener
	api       *sluicehttp.Server
	tracing   *tracing.Provider  // nil: tracing off
	cancel    context.CancelFunc // ends the background goroutines' context
	wg        sync.WaitGroup     // the listener and the HTTP server
	errc      chan error
	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main for cfg, not started.
func NewMain(cfg *Config, logger *slog.Logger) *Main {
	return &Main{Config: cfg, Logger: logger, cancel: func() {}, errc: make(chan error, 1)}
}

// Addr is the address the HTTP server listens on, once Run returned nil.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Err receives the HTTP server's error if it stops serving before Close.
func (m *Main) Err() <-chan error { return m.errc }

// Run opens and starts everything; ctx bounds the opening (waiting for
// Postgres, migrating). On an error, call Close to release what was opened.
func (m *Main) Run(ctx context.Context) error {
	cfg, logger := m.Config, m.Logger
	nofile := raiseNoFile(logger)
	auditKey, err := loadAuditKey(cfg, logger)
	if err != nil {
		return err
	}
	endpoints := splitList(cfg.EtcdEndpoints)
	if len(endpoints) == 0 {
		return errors.New("--etcd-endpoints is empty")
	}
	signer, err := loadSigner(cfg, logger)
	if err != nil {
		return err
	}
	tc := cfg.Tracing
	tc.Service, tc.Logger = "sluice-admin", logger
	tc.Dropped = tracing.AdminDropped()
	if m.tracing, err = tracing.New(tc); err != nil {
		return err
	}
	var tracer trace.Tracer // nil: no spans
	if m.tracing != nil {
		tracer = m.tracing.Tracer("sluice-admin")
	}
	if cfg.EmbeddedEtcd != "" {
		host := strings.TrimPrefix(strings.TrimPrefix(endpoints[0], "http://"), "https://")
		if m.embedded, err = etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{Dir: cfg.EmbeddedEtcd, ClientURL: "http://" + host, PeerURL: "http://" + cfg.EmbeddedEtcdPeer}); err != nil {
			return err
		}
		logger.Info("embedded etcd started", "client", host, "dir", cfg.EmbeddedEtcd)
	}

	var publisher *etcd.Publisher // set below, before anything can publish
	if m.db, err = openDB(ctx, cfg, postgres.Settings{Logger: logger, OnPublish: func(string) { publisher.Wake() }, AuditKey: auditKey,
		SessionTTL: cfg.SessionIdle, SessionMaxAge: cfg.SessionMaxAge}, logger); err != nil {
		return err
	}
	db := m.db
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	users := postgres.NewUserService(db)
	if err := bootstrapAdmin(ctx, users, cfg.BootstrapAdmin); err != nil {
		return err
	}

	if m.client, err = etcd.NewClientConfig(etcd.ClientConfig{Endpoints: endpoints, CAFile: cfg.EtcdCA, CertFile: cfg.EtcdCert, KeyFile: cfg.EtcdKey,
		Username: cfg.EtcdUsername, Password: cfg.EtcdPassword}); err != nil {
		return err
	}
	client := m.client
	keys := api.Keys{Prefix: cfg.EtcdPrefix}

	versions := postgres.NewVersionService(db)
	outbox := postgres.NewOutbox(db)
	namespaces := postgres.NewNamespaceService(db)
	audit := postgres.NewAuditService(db)
	if err := db.SetAuditCheckpoint(ctx, &etcd.AuditCheckpoint{Client: client, Keys: keys}); err != nil {
		return err
	}
	history := postgres.NewNodeHistory(db)
	changes := postgres.NewChangeService(db)
	events := postgres.NewEventService(db)
	canaries := postgres.NewCanaryService(db)
	hub := &sluice.Hub{}
	fleet := sluice.NewFleet(sluice.FleetSettings{Rules: func(ctx context.Context, ns string, n int64) (*api.RuleSet, error) {
		v, err := versions.FindVersion(ctx, ns, n)
		if err != nil {
			return nil, err
		}
		return sluice.DecodeDocument(v.Document)
	}})
	db.SetQuotaUsage(fleet.QuotaUsage)
	previews := &etcd.PreviewService{Client: client, Keys: keys, Changes: changes, Results: changes, Audit: audit, Fleet: fleet,
		Signer: signer, Logger: logger}
	srv, err := sluicehttp.New(sluicehttp.Settings{
		Stats:      fleet,
		Events:     events,
		Stream:     hub,
		Namespaces: namespaces,
		Drafts:     postgres.NewDraftService(db),
		Changes:    changes,
		Versions:   versions,
		Users:      users,
		Sessions:   postgres.NewSessionService(db),
		Tokens:     postgres.NewTokenService(db),
		Audit:      audit,
		Outbox:     outbox,
		Nodes: &etcd.NodeService{Client: client, Keys: keys, History: history, Audit: audit,
			Retention: cfg.NodeRetention, Logger: logger, Signer: signer, Reports: fleet},
		Canaries: canaries,
		Previews: previews,
		Ready: map[string]func(context.Context) error{
			"database": db.Ping,
			"etcd":     func(ctx context.Context) error { return etcd.PingKeys(ctx, client, keys) },
		},
		Logger:              logger,
		MaxBodyBytes:        cfg.MaxBodyBytes,
		SecureCookies:       cfg.SecureCookies,
		TrustForwardedProto: cfg.TrustForwardedProto,
		TrustedProxies:      splitList(cfg.TrustedProxies),
		WebDir:              cfg.WebDir,
		Streams:             cfg.Streams,
		SessionTTL:          cfg.SessionMaxAge,
		Tracer:              tracer,
	})
	if err != nil {
		return err
	}
	m.api = srv
	namespaceNames := func(ctx context.Context) ([]string, error) {
		nss, err := namespaces.FindNamespaces(ctx)
		names := make([]string, len(nss))
		for i, ns := range nss {
			names[i] = ns.Name
		}
		return names, err
	}
	publisher = etcd.NewPublisher(etcd.Settings{Client: client, Outbox: outbox, Keys: keys, Logger: logger,
		PollInterval: cfg.PollInterval, Observe: srv.ObservePublish,
		Signer: signer, Namespaces: namespaceNames, Current: etcd.CurrentVersion(versions), Tracer: tracer})
	m.publisher = publisher
	m.watcher = etcd.NewNodeWatcher(etcd.WatcherSettings{Client: client, History: history, Keys: keys, Logger: logger,
		Namespaces: namespaceNames})
	m.reports = etcd.NewReportWatcher(etcd.ReportSettings{Client: client, Fleet: fleet, Events: events, Hub: hub,
		Namespaces: namespaceNames, Keys: keys, Logger: logger})
	if err := srv.Register(append(m.reports.Collectors(), tc.Dropped)...); err != nil {
		return err
	}
	m.feed = &sluice.EventFeed{Source: events, Hub: hub, Logger: logger}
	m.pubFeed = &sluice.PublicationFeed{Source: outbox, Hub: hub, Logger: logger}
	m.pruner = &sluice.EventPruner{Events: events, Retention: cfg.EventRetention, Logger: logger}
	m.analyser = &sluice.CanaryAnalyser{Store: canaries, Fleet: fleet, Logger: logger}

	if m.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	maxConns := cfg.MaxConnections
	if maxConns == 0 {
		maxConns = maxConnsFor(nofile)
	}
	m.limit = newLimitListener(m.ln, maxConns, logger)
	logger.Info("admin API connection cap", "maxConnections", maxConns, "streamsPerUser", srv.StreamSettings().PerUser, "streamsTotal", srv.StreamSettings().Total)
	bg, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.publisher.Start(bg)
	m.watcher.Start(bg)
	m.reports.Start(bg)
	m.feed.Start(bg)
	m.pubFeed.Start(bg)
	m.pruner.Start(bg)
	m.analyser.Start(bg)
	m.scheduler = postgres.NewScheduler(changes, time.Second, logger)
	m.scheduler.Start(bg)
	m.wg.Add(3)
	go func() {
		defer m.wg.Done()
		previews.SweepPreviews(bg, namespaceNames, 0) // a published or rejected change's preview ends
	}()
	go func() {
		defer m.wg.Done()
		db.Listen(bg, func(string) { publisher.Wake() })
	}()
	m.hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	m.hs.RegisterOnShutdown(srv.CloseStreams)
	go func() {
		defer m.wg.Done()
		if err := m.hs.Serve(m.limit); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.errc <- fmt.Errorf("serving: %w", err)
		}
	}()
	logger.Info("sluice-admin serving", "listen", m.ln.Addr().String())
	return nil
}

// Close shuts down in order: stop accepting requests and finish those in
// flight (30s at most), stop the publisher (a write in progress finishes or
// stays pending), the node watcher and the publish scheduler, stop listening for notifications,
// then close the etcd client, the database and the embedded etcd. It waits
// for every goroutine Run started, and may be called after a failed Run or
// more than once.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		if m.hs != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := m.hs.Shutdown(sctx); err != nil {
				m.closeErr = fmt.Errorf("draining requests: %w", err)
			}
			scancel()
		} else if m.ln != nil {
			m.ln.Close()
		}
		if m.publisher != nil {
			m.publisher.Close()
		}
		if m.watcher != nil {
			m.watcher.Close()
		}
		if m.scheduler != nil {
			m.scheduler.Close()
		}
		if m.reports != nil {
			m.reports.Close()
			m.feed.Close()
			m.pubFeed.Close()
			m.pruner.Close()
			m.analyser.Close()
		}
		m.cancel()
		m.wg.Wait()
		if m.client != nil {
			m.client.Close()
		}
		if m.db != nil {
			m.db.Close()
		}
		if m.embedded != nil {
			m.embedded.Close()
		}
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.tracing.Shutdown(tctx) // exports what is queued
		tcancel()
	})
	return m.closeErr
}

// serve runs sluice-admin serve until ctx ends or the server fails.
func serve(ctx context.Context, cfg *Config, logger *slog.Logger) error {
	m := NewMain(cfg, logger)
	if err := m.Run(ctx); err != nil {
		m.Close()
		return err
	}
	var err error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-m.Err():
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadSigner reads --signing-key; without one it fails unless
// --insecure-publish-unsigned is given (nil signer, a warning logged).
func loadSigner(cfg *Config, logger *slog.Logger) (*api.Signer, error) {
	if len(cfg.SigningKeys) == 0 {
		if !cfg.InsecureUnsigned {
			return nil, errors.New("no --signing-key: every value published to etcd is signed (create a key pair with 'sluice-admin keygen'), or give --insecure-publish-unsigned")
		}
		logger.Warn("publishing UNSIGNED values (--insecure-publish-unsigned): anyone who can write to etcd can change the nodes' rules")
		return nil, nil
	}
	s, err := api.ReadSigner(cfg.SigningKeys...)
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	logger.Info("signing published values", "key", s.KeyID(), "recognised", s.KeyIDs())
	return s, nil
}

// keygen writes a new Ed25519 key pair: the private key (PKCS#8 PEM, mode
// 0600, never overwritten) for --signing-key and the public key (PKIX PEM)
// for the nodes' --trust-keys, and prints the key id.
func keygen(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sluice-admin keygen", flag.ContinueOnError)
	priv := fs.String("private", "", "file to create for the private key (--signing-key); required")
	pub := fs.String("public", "", "file to write the public key to (the nodes' --trust-keys); required")
	ifMissing := fs.Bool("if-missing", false, "do nothing when both files exist (for a start-up job)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *priv == "" || *pub == "" || fs.NArg() > 0 {
		return errors.New("usage: sluice-admin keygen [--if-missing] --private FILE --public FILE")
	}
	if *ifMissing {
		_, perr := os.Stat(*priv)
		_, uerr := os.Stat(*pub)
		if perr == nil && uerr == nil {
			fmt.Fprintf(out, "%s and %s exist; nothing to do\n", *priv, *pub)
			return nil
		}
	}
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key: %w", err)
	}
	skPEM, err := api.MarshalPrivateKey(sk)
	if err != nil {
		return err
	}
	pkPEM, err := api.MarshalPublicKey(pk)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*priv, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating the private key file: %w", err)
	}
	if _, err := f.Write(skPEM); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", *priv, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", *priv, err)
	}
	if err := os.WriteFile(*pub, pkPEM, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *pub, err)
	}
	fmt.Fprintf(out, "key %s: private %s, public %s\n", api.KeyID(pk), *priv, *pub)
	return nil
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

// loadAuditKey reads the audit key from --audit-key-file or
// $SLUICE_AUDIT_KEY. Without one, sluice-admin refuses to start unless
// --insecure-no-audit-key says to go on with an unkeyed chain.
func loadAuditKey(cfg *Config, logger *slog.Logger) ([]byte, error) {
	var raw []byte
	switch v, inEnv := os.LookupEnv("SLUICE_AUDIT_KEY"); {
	case cfg.AuditKeyFile != "":
		b, err := os.ReadFile(cfg.AuditKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--audit-key-file: %w", err)
		}
		raw = b
	case inEnv:
		raw = []byte(v)
	case cfg.InsecureNoAuditKey:
		logger.Warn("running without an audit key (--insecure-no-audit-key): the audit log can be rewritten undetectably by anyone who can write the database")
		return nil, nil
	default:
		return nil, errors.New("no audit key: set --audit-key-file or $SLUICE_AUDIT_KEY (make one with: openssl rand -hex 32), or pass --insecure-no-audit-key")
	}
	key, err := sluice.ParseAuditKey(raw)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	return key, nil
}
