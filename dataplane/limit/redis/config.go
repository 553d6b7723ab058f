package redislimit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Settings.
const (
	DefaultPrefix         = "sluice:"
	DefaultTimeout        = 20 * time.Millisecond
	DefaultFailuresToOpen = 3
	DefaultProbeEvery     = 250 * time.Millisecond
	DefaultLeaseTTL       = 200 * time.Millisecond
	DefaultLeaseFraction  = 0.05
	DefaultMaxKeys        = 100000
	DefaultDegradedFor    = 10 * time.Second
)

// clientOptions are the connection settings derived from the flags, with the
// password kept out of every error and String.
type clientOptions struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

// errNoRedis is returned by NewClient when neither --redis nor
// --redis-cluster is set.
var errNoRedis = errors.New("no redis configured: set --redis or --redis-cluster")

// parseFlags turns --redis and --redis-cluster into client options. Exactly
// one of them must be set. --redis is a URL:
//
//	redis://[user:password@]host[:port][/db]            one server
//	rediss://...                                        the same over TLS
//	unix://[user:password@]/path/to/socket[?db=N]       a Unix socket
//	redis://[:password@]sentinel:26379/db?master_name=M&addr=sentinel2:26379
//	                                                    Sentinel (master_name set)
//
// --redis-cluster is a comma-separated list of host:port seed addresses, or
// a redis:// URL with more seeds as addr= parameters (which is how a cluster
// password is given). Errors never contain a password.
func parseFlags(rawURL, clusterAddrs string) (clientOptions, error) {
	rawURL, clusterAddrs = strings.TrimSpace(rawURL), strings.TrimSpace(clusterAddrs)
	switch {
	case rawURL == "" && clusterAddrs == "":
		return clientOptions{}, errNoRedis
	case rawURL != "" && clusterAddrs != "":
		return clientOptions{}, errors.New("--redis and --redis-cluster are exclusive: set one")
	case rawURL != "":
		return parseURL(rawURL)
	default:
		return parseCluster(clusterAddrs)
	}
}

func parseURL(raw string) (clientOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return clientOptions{}, fmt.Errorf("--redis: malformed URL %s: want redis://[user:password@]host:port[/db]", redactRaw(raw))
	}
	shown := u.Redacted()
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return clientOptions{}, fmt.Errorf("--redis %s: scheme %q is not redis, rediss or unix", shown, u.Scheme)
	}
	if u.Scheme != "unix" && u.Host == "" {
		return clientOptions{}, fmt.Errorf("--redis %s: no host", shown)
	}
	if u.Scheme != "unix" {
		if _, port, err := net.SplitHostPort(u.Host); err == nil {
			if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
				return clientOptions{}, fmt.Errorf("--redis %s: bad port %q", shown, port)
			}
		}
	}
	if u.Query().Get("master_name") != "" {
		if u.Scheme == "unix" {
			return clientOptions{}, fmt.Errorf("--redis %s: sentinel needs redis:// or rediss://", shown)
		}
		o, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return clientOptions{}, fmt.Errorf("--redis %s: %s", shown, scrub(err, raw, u))
		}
		return clientOptions{failover: o}, nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return clientOptions{}, fmt.Errorf("--redis %s: %s", shown, scrub(err, raw, u))
	}
	return clientOptions{single: o}, nil
}

func parseCluster(raw string) (clientOptions, error) {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return clientOptions{}, fmt.Errorf("--redis-cluster: malformed URL %s: want redis://[user:password@]host:port?addr=host:port", redactRaw(raw))
		}
		o, err := redis.ParseClusterURL(raw)
		if err != nil {
			return clientOptions{}, fmt.Errorf("--redis-cluster %s: %s", u.Redacted(), scrub(err, raw, u))
		}
		return clientOptions{cluster: o}, nil
	}
	var addrs []string
	for _, a := range strings.Split(raw, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return clientOptions{}, fmt.Errorf("--redis-cluster: %q is not host:port", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return clientOptions{}, fmt.Errorf("--redis-cluster: %q has a bad port", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return clientOptions{}, errors.New("--redis-cluster: no addresses")
	}
	return clientOptions{cluster: &redis.ClusterOptions{Addrs: addrs}}, nil
}

// redactRaw shows an unparsable URL without anything that may be a password:
// the scheme and whatever follows the last '@'.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(not a URL)"
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = "xxxxx@" + rest[i+1:]
	}
	return scheme + "://" + rest
}

// scrub returns err's text with the URL and its password replaced.
func scrub(err error, raw string, u *url.URL) string {
	s := strings.ReplaceAll(err.Error(), raw, u.Redacted())
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}

// newClient builds the client with the request-path settings: no retries (a
// decision has one deadline), context deadlines honoured on the socket,
// short pool waits.
func (o clientOptions) newClient(timeout time.Duration) redis.UniversalClient {
	const minDial = 250 * time.Millisecond
	dial := max(timeout, minDial)
	switch {
	case o.single != nil:
		c := *o.single
		c.MaxRetries = -1
		c.ContextTimeoutEnabled = true
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.PoolTimeout = dial, timeout, timeout, timeout
		c.DisableIdentity = true
		c.DialerRetries = 1 // a decision has one deadline; the prober retries
		return redis.NewClient(&c)
	case o.failover != nil:
		c := *o.failover
		c.MaxRetries = -1
		c.ContextTimeoutEnabled = true
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.PoolTimeout = dial, timeout, timeout, timeout
		c.DisableIdentity = true
		c.DialerRetries = 1 // a decision has one deadline; the prober retries
		return redis.NewFailoverClient(&c)
	default:
		c := *o.cluster
		c.MaxRetries = -1
		c.ContextTimeoutEnabled = true
		c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.PoolTimeout = dial, timeout, timeout, timeout
		c.DisableIdentity = true
		c.DialerRetries = 1 // a decision has one deadline; the prober retries
		if c.TLSConfig != nil && c.TLSConfig.MinVersion == 0 {
			c.TLSConfig.MinVersion = tls.VersionTLS12
		}
		return redis.NewClusterClient(&c)
	}
}

// RouteClientLogs sends the go-redis client's own log lines (failed dials,
// pool errors) to log at debug level instead of the standard logger: the
// Store already counts, reports and logs Redis failures once. It affects the
// whole process.
func RouteClientLogs(log *slog.Logger) {
	redis.SetLogger(clientLogger{log})
}

type clientLogger struct{ log *slog.Logger }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
