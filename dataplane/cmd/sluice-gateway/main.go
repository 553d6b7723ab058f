// Command sluice-gateway is a Sluice gateway node: a reverse proxy that
// enforces the rate limits, circuit breakers and degrade plans of a rule set.
//
// Standalone, it reads its rules from a file, watches it and reloads it on
// change or SIGHUP:
//
//	sluice-gateway --rules rules.yaml --listen :9000 --admin 127.0.0.1:9901
//
// Every flag can also be set by an environment variable named SLUICE_ and the
// flag's name in upper case with dashes as underscores (SLUICE_ADMIN_TOKEN for
// --admin-token); a flag on the command line wins. Secrets (the admin token)
// are best passed by environment or file, never on the command line.
//
// Following etcd, the node verifies the signature of every value the control
// plane wrote (rule set, canary, override, preview) against --trust-keys, one or more
// PKIX PEM "PUBLIC KEY" blocks, and refuses values that are unsigned, signed
// by another key, or altered. Without --trust-keys it refuses to start
// unless --insecure-accept-unsigned is given. --etcd-ca, --etcd-cert,
// --etcd-key, --etcd-username and --etcd-password-file (or
// SLUICE_ETCD_PASSWORD) reach an etcd with TLS and auth.
//
// --listen-tls ADDR with --tls-cert FILE and --tls-key FILE (PEM) also
// serves TLS 1.2+ with ALPN h2 and http/1.1; the pair is reloaded when the
// files change, and a bad new pair is refused (logged, counted in
// sluice_tls_cert_reloads_total{result="error"}) while the old one serves.
// --tls-ocsp-staple staples the responder's OCSP answer for the leaf (the
// certificate file then holds the issuer after the leaf).
//
// --access-log PATH (or - for standard output) appends one JSON line per
// request, the format `sluicectl simulate` replays; only User-Agent and the
// headers and cookies the rules key on are logged (see package accesslog).
//
// --otlp-endpoint URL (or OTEL_EXPORTER_OTLP_ENDPOINT) exports an
// OpenTelemetry span per sampled request over OTLP/HTTP (--otlp-sample-ratio
// of the traces the gateway starts, default 0.01; a caller's sampled
// traceparent is always followed); see package tracing. --version prints
// the build and exits.
//
// An invalid rules file at start exits with status 1 and the field-path
// errors; later, an invalid file is refused and the node keeps serving the
// last good rules. SIGTERM and SIGINT drain in-flight requests, then exit 0.
// A part of the node that fails while it serves (the file watch, the etcd
// source, the registration...: an error or a panic) drains the node and
// exits 1 with that error; see gateway.Node.Run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/api/buildinfo"
	"github.com/sluicegw/sluice/dataplane/accesslog"
	"github.com/sluicegw/sluice/dataplane/gateway"
	"github.com/sluicegw/sluice/dataplane/internal/logq"
	redislimit "github.com/sluicegw/sluice/dataplane/limit/redis"
	"github.com/sluicegw/sluice/dataplane/metrics"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/snapshot"
	"github.com/sluicegw/sluice/dataplane/source"
	"github.com/sluicegw/sluice/dataplane/tracing"
)

func main() {
	// A proxy allocates per request and holds little: collecting less often
	// (GOGC=400 unless the environment says otherwise) trades a little
	// memory for CPU on the hot path.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sluice-gateway:", err)
		}
		os.Exit(1)
	}
}

type options struct {
	listen, admin, rules       string
	adminToken, adminTokenFile string
	adminAllowedHosts          string
	trustedProxies             string
	maxKeys                    int
	shutdownTimeout            time.Duration
	logLevel                   string
	pprof                      bool
	eventLoops                 int
	etcd, etcdPrefix           string
	namespace, nodeID, labels  string
	stateDir, advertise        string
	redisURL, redisCluster     string
	redisPrefix                string
	redisTimeout               time.Duration
	clusterSize                int
	trustKeys                  string
	insecureUnsigned           bool
	etcdCA, etcdCert, etcdKey  string
	etcdUser, etcdPassword     string
	etcdPasswordFile           string
	encodedSlashes             proxy.SlashPolicy
	listenTLS, tlsCert, tlsKey string
	tlsStaple                  bool
	reportInterval             time.Duration
	accessLog                  string
	tracing                    tracing.Config
	version                    bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("sluice-gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":9000", "traffic address")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:9901", "node admin address (/status, /metrics, /healthz, /readyz); keep it on loopback or set an admin token")
	fs.StringVar(&o.rules, "rules", "", "rules file (YAML or JSON), watched and reloaded on change and on SIGHUP")
	fs.StringVar(&o.adminToken, "admin-token", "", "token non-loopback admin clients must send as 'Authorization: Bearer'; prefer SLUICE_ADMIN_TOKEN or --admin-token-file")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file holding the admin token")
	fs.StringVar(&o.adminAllowedHosts, "admin-allowed-hosts", "", "comma-separated names the admin endpoint answers to besides localhost, loopback addresses and --admin's host (other Host headers are refused, against DNS rebinding)")
	fs.StringVar(&o.trustedProxies, "trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For is believed for the client IP")
	fs.IntVar(&o.maxKeys, "max-keys", 0, "most keys one limit tracks before evicting the least recently used (0: the default, 1048576)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to drain in-flight requests on SIGTERM")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.etcd, "etcd", "", "etcd endpoints (host:port,...) to follow the control plane's published rules instead of --rules")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", api.DefaultEtcdPrefix, "prefix of Sluice's etcd keys")
	fs.StringVar(&o.namespace, "namespace", "", "namespace whose rules this node runs (with --etcd)")
	fs.StringVar(&o.nodeID, "node-id", "", "this node's id in the registry (default: the host name)")
	fs.StringVar(&o.labels, "labels", "", "this node's labels k=v,... (canary selectors match them)")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory caching every applied version; the node boots from it when etcd cannot be reached (with --etcd)")
	fs.StringVar(&o.advertise, "advertise", "", "traffic address published in the registry (default: --listen, with this host's name when it has no host)")
	fs.StringVar(&o.redisURL, "redis", "", "Redis for scope: cluster limits: redis://[user:pass@]host:port[/db], rediss://..., or Sentinel with ?master_name=M&addr=host:port; prefer SLUICE_REDIS to keep a password off the command line")
	fs.StringVar(&o.redisCluster, "redis-cluster", "", "Redis Cluster seed addresses host:port,host:port,... (instead of --redis)")
	fs.StringVar(&o.redisPrefix, "redis-prefix", "sluice:", "prefix of every Redis key this node writes")
	fs.DurationVar(&o.redisTimeout, "redis-timeout", 20*time.Millisecond, "deadline of every Redis call; past it the limit's onStoreError policy decides")
	fs.IntVar(&o.clusterSize, "cluster-size", 1, "number of gateway nodes, for onStoreError: local (limit ÷ nodes) when the node does not follow etcd")
	fs.TextVar(&o.encodedSlashes, "encoded-slashes", proxy.SlashReject, "what to do with %2F in request paths: reject (400), decode (to /, for upstreams that decode it) or keep (one segment, for upstreams that never decode it)")
	fs.DurationVar(&o.reportInterval, "report-interval", 5*time.Second, "how often the node writes its report (per-rule counters, breaker states, degrade levels) for the control plane, with --etcd; 0 turns reporting off")
	fs.StringVar(&o.accessLog, "access-log", "", "write one JSON line per request ({ts, ip, method, host, path, headers}: what sluicectl simulate replays) to this file, appended, or - for standard output; only User-Agent and the headers and cookies the rules key on are logged (see package accesslog); rotation is the operator's (copytruncate)")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the admin endpoint")
	fs.StringVar(&o.trustKeys, "trust-keys", "", "PEM file(s), comma-separated, of the Ed25519 public keys whose signatures the node accepts on etcd values (with --etcd)")
	fs.BoolVar(&o.insecureUnsigned, "insecure-accept-unsigned", false, "follow etcd without --trust-keys, accepting unsigned values: anyone who can write to etcd controls this node")
	fs.StringVar(&o.etcdCA, "etcd-ca", "", "PEM file of the CA of etcd's server certificates")
	fs.StringVar(&o.etcdCert, "etcd-cert", "", "PEM client certificate for etcd")
	fs.StringVar(&o.etcdKey, "etcd-key", "", "PEM key of --etcd-cert")
	fs.StringVar(&o.etcdUser, "etcd-username", "", "etcd user, with etcd auth enabled (password from --etcd-password-file or SLUICE_ETCD_PASSWORD)")
	fs.StringVar(&o.etcdPasswordFile, "etcd-password-file", "", "file holding the etcd user's password")
	fs.StringVar(&o.listenTLS, "listen-tls", "", "TLS traffic address (TLS 1.2+, ALPN h2 and http/1.1), with --tls-cert and --tls-key")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate chain of --listen-tls, reloaded when it changes")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert, reloaded when it changes")
	fs.BoolVar(&o.tlsStaple, "tls-ocsp-staple", false, "staple OCSP responses from the leaf's responder to TLS handshakes (the --tls-cert file must hold the issuer after the leaf)")
	tracing.Flags(fs, &o.tracing)
	fs.BoolVar(&o.version, "version", false, "print the build (version, commit, date) and exit")
	fs.IntVar(&o.eventLoops, "event-loops", 0, "event loops serving HTTP/1.1 (cleartext and TLS); 0 means one per processor (GOMAXPROCS, which follows the cgroup CPU quota); a number lowers it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice-gateway --rules FILE [flags]\n\nFlags (each also read from SLUICE_<NAME>):\n")
		fs.PrintDefaults()
	}
	// Environment first, so that the command line wins.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for environment %s: %w", v, name, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if o.version {
		return &o, nil
	}
	switch {
	case o.rules == "" && o.etcd == "":
		return nil, errors.New("give --rules FILE (standalone) or --etcd URLS --namespace NS (follow the control plane)")
	case o.rules != "" && o.etcd != "":
		return nil, errors.New("--rules and --etcd are exclusive: a node follows one source")
	case o.etcd != "" && o.namespace == "":
		return nil, errors.New("--etcd needs --namespace NS")
	case o.etcd != "" && !api.ValidID(o.namespace):
		return nil, fmt.Errorf("--namespace %q is not a valid namespace id", o.namespace)
	case o.etcd != "" && o.trustKeys == "" && !o.insecureUnsigned:
		return nil, errors.New("--etcd needs --trust-keys FILE (the control plane's public signing keys), or --insecure-accept-unsigned to accept unsigned values")
	case o.reportInterval < 0 || o.reportInterval > 0 && o.reportInterval < 100*time.Millisecond:
		return nil, fmt.Errorf("--report-interval %s: must be 0 (off) or at least 100ms", o.reportInterval)
	case o.trustKeys != "" && o.insecureUnsigned:
		return nil, errors.New("--trust-keys and --insecure-accept-unsigned are exclusive")
	case o.listenTLS != "" && (o.tlsCert == "" || o.tlsKey == ""):
		return nil, errors.New("--listen-tls needs --tls-cert FILE and --tls-key FILE")
	case o.listenTLS == "" && (o.tlsCert != "" || o.tlsKey != ""):
		return nil, errors.New("--tls-cert and --tls-key need --listen-tls ADDR to serve on")
	case o.listenTLS == "" && o.tlsStaple:
		return nil, errors.New("--tls-ocsp-staple needs --listen-tls ADDR with --tls-cert and --tls-key")
	}
	if o.eventLoops < 0 {
		return nil, fmt.Errorf("--event-loops %d: must be 0 (the default) or more", o.eventLoops)
	}
	if v := os.Getenv("SLUICE_HTTP1_ENGINE"); v != "" {
		// --http1-engine is gone: one engine serves HTTP/1.1. Its variable
		// is refused rather than ignored, so that a setting that no
		// longer does anything is found out.
		return nil, fmt.Errorf("SLUICE_HTTP1_ENGINE=%q: removed (one HTTP/1.1 engine, the event loops, serves every connection); unset it", v)
	}
	o.etcdPassword = os.Getenv("SLUICE_ETCD_PASSWORD")
	if o.etcdPasswordFile != "" {
		b, err := os.ReadFile(o.etcdPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("reading --etcd-password-file: %w", err)
		}
		o.etcdPassword = strings.TrimRight(string(b), "\r\n")
	}
	if o.nodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--node-id not given and the host name is unknown: %w", err)
		}
		o.nodeID = h
	}
	if o.etcd != "" {
		if err := api.ValidateNodeID(o.nodeID); err != nil {
			return nil, fmt.Errorf("--node-id: %w", err)
		}
	}
	if o.adminTokenFile != "" {
		b, err := os.ReadFile(o.adminTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading --admin-token-file: %w", err)
		}
		o.adminToken = strings.TrimSpace(string(b))
	}
	return &o, nil
}

func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := api.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		_, err := fmt.Fprintln(os.Stdout, "sluice-gateway", buildinfo.String())
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	m := metrics.New()
	// Log lines go through a queue: a stuck stderr (a collector that
	// stopped reading the pipe) drops and counts lines instead of stalling
	// the event loops that log decisions.
	logOut := logq.New(stderr, 0, m.LogsDropped.Inc)
	defer logOut.Close(2 * time.Second)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	trusted, err := parseCIDRs(o.trustedProxies)
	if err != nil {
		return err
	}
	warnBroadProxies(log, trusted)

	snapOpts := snapshot.Options{EncodedSlashes: o.encodedSlashes}
	tc := o.tracing
	tc.Service, tc.Instance, tc.Logger = "sluice-gateway", o.nodeID, log
	tc.Dropped = tracing.GatewayDropped()
	m.Registry.MustRegister(tc.Dropped)
	if snapOpts.Tracer, err = tracing.New(tc); err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = snapOpts.Tracer.Shutdown(ctx) // exports what is queued
	}()
	if o.accessLog != "" {
		al, err := accesslog.Open(o.accessLog, m.AccessLogDropped.Inc)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		defer al.Close(2 * time.Second)
		snapOpts.AccessLog = al
	}
	stores := map[string]func() any{}
	var etcd *etcdDeps
	if o.etcd != "" {
		if etcd, err = dialEtcd(o, log, m); err != nil {
			return err
		}
		defer etcd.close()
	}
	var quotaUsage func(string, *api.RuleSet) []api.QuotaUsage
	if o.redisURL != "" || o.redisCluster != "" {
		redislimit.RouteClientLogs(log)
		rs := redislimit.Settings{
			URL: o.redisURL, ClusterAddrs: o.redisCluster, Prefix: o.redisPrefix,
			Timeout: o.redisTimeout, ClusterSize: o.clusterSize, Metrics: m,
		}
		if etcd != nil {
			rs.Nodes = etcd.nodes.Count // limit ÷ live nodes from the registry
		}
		st, err := redislimit.New(ctx, rs)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		defer st.Close()
		snapOpts.Cluster = st.Cluster
		stores["redis"] = func() any { return st.Status() }
		quotaUsage = st.QuotaUsage
	}

	node := gateway.New(gateway.Config{
		Metrics:         m,
		Snapshot:        snapOpts,
		Stores:          stores,
		QuotaUsage:      quotaUsage,
		Listen:          o.listen,
		Admin:           o.admin,
		AdminToken:      o.adminToken,
		TrustedProxies:  trusted,
		MaxKeysPerLimit: o.maxKeys,
		ShutdownTimeout: o.shutdownTimeout,
		Logger:          log,
		Pprof:           o.pprof,

		AdminAllowedHosts: splitList(o.adminAllowedHosts),
		NodeID:            o.nodeID,
		ListenTLS:         o.listenTLS,
		TLSCertFile:       o.tlsCert,
		TLSKeyFile:        o.tlsKey,
		TLSOCSPStaple:     o.tlsStaple,
		EventLoops:        o.eventLoops,
	})

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var components []gateway.Component
	if o.etcd != "" {
		labels, err := api.ParseLabels(o.labels)
		if err != nil {
			return fmt.Errorf("--labels: %w", err)
		}
		components, err = node.FollowEtcd(ctx, gateway.EtcdFollow{
			Client: etcd.client, Authed: etcd.wait, Keys: etcd.keys,
			Namespace: o.namespace, NodeID: o.nodeID, Labels: labels, StateDir: o.stateDir, Advertise: advertise(o),
			Verifier: etcd.verifier, Nodes: etcd.nodes, ReportInterval: reportInterval(o.reportInterval),
			OnSignatureRejection: func(what, reason string) { etcd.rejected.WithLabelValues(what, reason).Inc() },
		})
		if err != nil {
			return err
		}
		components = append(components, etcd.components()...)
	} else {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		if components, err = node.FollowFile(ctx, &source.File{Path: o.rules, Logger: log}, hup); err != nil {
			return err
		}
	}
	ls, err := node.Listen()
	if err != nil {
		return err
	}
	return node.Run(ctx, ls, components...)
}

// reportInterval maps --report-interval to EtcdFollow.ReportInterval: 0
// (off) becomes negative.
func reportInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
