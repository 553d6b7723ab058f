// Package api is the contract between Sluice's parts: the rule-set types, strict
// decoding of rule documents from YAML or JSON, validation with field paths, the
// canonical form and its checksum, the JSON Schema (Schema), the shared request
// semantics (CleanPath, ClientIP, Applies, the rate-limit header names), the
// published value read from etcd (DecodePublished) and the etcd key layout
// (Keys).
//
// It depends on the standard library and one YAML library only, so that the
// control plane, the gateway and any tool can import it without pulling in a
// server framework.
//
// A rule document goes through three steps, each a function here:
//
//	rs, err := api.Decode(data)   // strict: unknown fields, duplicate keys, type errors
//	err = rs.Validate()           // every field, with its path: "limits[2].rate: must be > 0"
//	sum := rs.Checksum()          // sha256 of the canonical JSON form, defaults applied
//
// Decode and Validate return Errors, a list of FieldError values, so that a
// caller can show every problem at once; AsErrors recovers them from a
// wrapped error. Decode never returns a partial rule set. It refuses documents
// over MaxDocumentBytes, nested deeper than MaxDocumentDepth, not UTF-8,
// holding several YAML documents, YAML merge keys (<<), aliases that expand
// past a fixed budget (alias bombs), NaN, infinities and out-of-range numbers.
//
// The canonical form (Canonical) is the JSON encoding of Normalize's result:
// every default written out, struct fields in declaration order, map keys and
// JSON fallback bodies sorted, header names canonical. The same rules written
// as YAML or JSON, in any key order, with or without their defaults, have one
// canonical form and one checksum. Checksums are stored with every version, so
// the canonical form must not change by accident; testdata/full.canonical.json
// pins it.
//
// Everything here is safe for concurrent use; a RuleSet is plain data that
// callers must not mutate while others read it.
package api

import "time"

// RuleSet is one namespace's rules: the unit that is edited, reviewed, versioned,
// published, diffed and rolled back. The zero value is an empty (invalid, for want
// of a namespace) rule set.
type RuleSet struct {
	Namespace string `json:"namespace"`
	// Kind says what runs the rule set: empty (or KindGateway) a gateway;
	// KindService a service through the in-service SDK (dataplane/sdk), whose
	// routes have no upstream (its own handlers answer) and whose limits,
	// breakers and degrade plans may name Resources. Each refuses the other's
	// documents.
	Kind     RuleSetKind `json:"kind,omitempty"`
	Routes   []Route     `json:"routes,omitempty"`
	Limits   []Limit     `json:"limits,omitempty"`
	Breakers []Breaker   `json:"breakers,omitempty"`
	Degrades []Degrade   `json:"degrades,omitempty"`
	// Classes are the priority classes (see Class); empty means every
	// request is of class "default".
	Classes []Class `json:"classes,omitempty"`
	// Identities verify callers' JWTs on their routes (see Identity);
	// limits key on the verified claims (jwt:CLAIM key parts), tiers and
	// classes match them.
	Identities []Identity `json:"identities,omitempty"`
}

// RuleSetKind says what runs a rule set (RuleSet.Kind).
type RuleSetKind string

// The kinds of rule set.
const (
	// KindGateway is a gateway's rule set: the default, written as absent.
	KindGateway RuleSetKind = "gateway"
	// KindService is a service's rule set, run by the in-service SDK: its
	// routes have no upstream and its rules may name resources.
	KindService RuleSetKind = "service"
)

// RuleSetKinds lists every RuleSetKind.
var RuleSetKinds = []RuleSetKind{KindGateway, KindService}

// MaxResourceLength bounds a resource name (Limit.Resources), in bytes.
const MaxResourceLength = 256

// Route sends the requests it matches to an upstream. In a kind: service
// document a route has no upstream: it names requests the service's own
// handlers answer, which the SDK's HTTP middleware guards.
type Route struct {
	ID       string   `json:"id"`
	Match    Match    `json:"match"`
	Upstream Upstream `json:"upstream,omitzero"`
}

// Match says which requests a route takes. Exactly one of Path, PathPrefix and
// PathRegex may be set; none means every path. Empty Hosts, Methods and Headers
// match anything.
type Match struct {
	Hosts      []string          `json:"hosts,omitempty"`
	Path       string            `json:"path,omitempty"`
	PathPrefix string            `json:"pathPrefix,omitempty"`
	PathRegex  string            `json:"pathRegex,omitempty"`
	Methods    []string          `json:"methods,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
}

// Upstream is where a route's requests go.
type Upstream struct {
	Targets []Target `json:"targets"`
	// Timeout bounds the whole upstream exchange; zero means DefaultUpstreamTimeout.
	Timeout Duration `json:"timeout,omitempty"`
	// BodyTimeout bounds the wait for each part of the client's request
	// body: a client that sends nothing of a body it announced for this
	// long is answered 408 and its connection closed (nginx's
	// client_body_timeout); zero means DefaultBodyTimeout.
	BodyTimeout Duration `json:"bodyTimeout,omitempty"`
	// WriteTimeout bounds each write of the response to the client: a
	// client that takes nothing of the response for this long has its
	// connection closed (nginx's send_timeout), which frees its limit
	// slots; zero means DefaultWriteTimeout.
	WriteTimeout Duration `json:"writeTimeout,omitempty"`
	// StripPrefix removes the route's pathPrefix before forwarding.
	StripPrefix bool `json:"stripPrefix,omitempty"`
	// HealthCheck, when set, probes every target actively (see HealthCheck).
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// Outlier, when set, ejects targets that fail in a row (see Outlier).
	Outlier *Outlier `json:"outlier,omitempty"`
	// Protocol is the HTTP version spoken to the targets; empty means by
	// each target's scheme: HTTP/1.1 to http://, ALPN (h2 or http/1.1) to
	// https://, cleartext HTTP/2 to h2c://. See UpstreamProtocol.
	Protocol UpstreamProtocol `json:"protocol,omitempty"`
	// TLS verifies https:// targets against a CA of its own and names the
	// server expected; nil means the system roots and each target's host.
	// Every target must be https:// when it is set.
	TLS *UpstreamTLS `json:"tls,omitempty"`
}

// UpstreamProtocol is the HTTP version a route speaks to its targets.
type UpstreamProtocol string

// The protocols an Upstream may name.
const (
	// ProtocolHTTP1 is HTTP/1.1 only, also over TLS (no ALPN h2); targets
	// are http:// or https://.
	ProtocolHTTP1 UpstreamProtocol = "http1"
	// ProtocolH2 is HTTP/2 over TLS (ALPN h2, required); targets are
	// https://. For gRPC upstreams with TLS.
	ProtocolH2 UpstreamProtocol = "h2"
	// ProtocolH2C is HTTP/2 over cleartext TCP with prior knowledge;
	// targets are http:// or h2c://. For gRPC upstreams without TLS.
	ProtocolH2C UpstreamProtocol = "h2c"
)

// UpstreamProtocols lists every UpstreamProtocol.
var UpstreamProtocols = []UpstreamProtocol{ProtocolHTTP1, ProtocolH2, ProtocolH2C}

// UpstreamTLS is how the gateway verifies its https:// targets.
type UpstreamTLS struct {
	// CA holds PEM "CERTIFICATE" blocks, the roots that target
	// certificates must chain to, in place of the system roots; empty
	// means the system roots. The certificates travel inline (they are
	// public), so one rule set means the same on every node.
	CA string `json:"ca,omitempty"`
	// ServerName is the name the targets' certificates must carry (and the
	// SNI sent); empty means each target's host.
	ServerName string `json:"serverName,omitempty"`
}

// Target is one upstream server. Weight zero means 1.
type Target struct {
	URL    string `json:"url"`
	Weight int    `json:"weight,omitempty"`
}

// Algorithm names a rate-limit algorithm.
type Algorithm string

// The algorithms a Limit may use.
const (
	TokenBucket   Algorithm = "token_bucket"
	SlidingWindow Algorithm = "sliding_window"
	FixedWindow   Algorithm = "fixed_window"
	LeakyBucket   Algorithm = "leaky_bucket"
	Concurrency   Algorithm = "concurrency"
	Adaptive      Algorithm = "adaptive" // a concurrency limit that follows upstream latency
	// Quota is an exact count per calendar period (Limit.Calendar) or fixed
	// Period, kept in Redis (scope: cluster): it survives gateway restarts
	// and rule changes, and resets at the period's boundary.
	Quota Algorithm = "quota"
)

// Algorithms lists every Algorithm, in documentation order.
var Algorithms = []Algorithm{TokenBucket, SlidingWindow, FixedWindow, LeakyBucket, Concurrency, Adaptive, Quota}

// Scope says where a limit's counters live.
type Scope string

// The scopes a Limit may have.
const (
	ScopeNode    Scope = "node"    // in the gateway's memory
	ScopeCluster Scope = "cluster" // shared by every node through Redis
)

// Scopes lists every Scope.
var Scopes = []Scope{ScopeNode, ScopeCluster}

// StoreErrorPolicy says what a cluster limit does while its store (Redis) fails.
type StoreErrorPolicy string

// The policies for OnStoreError.
const (
	OnStoreErrorLocal StoreErrorPolicy = "local" // enforce the limit divided by the live nodes, in memory
	OnStoreErrorAllow StoreErrorPolicy = "allow" // admit everything
	OnStoreErrorDeny  StoreErrorPolicy = "deny"  // reject everything
)

// StoreErrorPolicies lists every StoreErrorPolicy.
var StoreErrorPolicies = []StoreErrorPolicy{OnStoreErrorLocal, OnStoreErrorAllow, OnStoreErrorDeny}

// ClusterMode says how a cluster limit talks to its store.
type ClusterMode string

// The modes of a cluster limit.
const (
	ModeExact   ClusterMode = "exact"   // one store round trip per decision
	ModeBatched ClusterMode = "batched" // leases of tokens spent locally
)

// ClusterModes lists every ClusterMode.
var ClusterModes = []ClusterMode{ModeExact, ModeBatched}

// Limit is one rate or concurrency limit.
type Limit struct {
	ID string `json:"id"`
	// Routes the limit applies to; empty means every route (in a kind:
	// service document, only the routes and resources it names).
	Routes []string `json:"routes,omitempty"`
	// Resources are the SDK resources the limit applies to (the names a
	// service passes to sdk.Guard.Do, or a gRPC full method name); only in
	// kind: service documents.
	Resources []string `json:"resources,omitempty"`
	// Key is the list of dimensions whose values form the limited key: ip, route,
	// global, header:NAME, query:NAME, cookie:NAME. Empty means [global].
	Key []string `json:"key,omitempty"`
	// IPv6Prefix is the length of the prefix an IPv6 client is keyed by in
	// an ip key part: one host commonly holds a whole /64, so keying per
	// address would give it 2^64 identities. 0 means DefaultIPv6Prefix;
	// IPv4 clients are keyed per address; exempt CIDRs still match the
	// whole address.
	IPv6Prefix int `json:"ipv6Prefix,omitempty"`
	// CookieDecoding is how cookie:NAME key parts read the cookie's value:
	// CookiePercent (the default, empty) percent-decoded as PHP and Express
	// read it, so that every spelling of one value is one key; CookieRaw as
	// sent, for upstreams that read it raw and take values a decoding
	// upstream could read two ways (refused with 400 under CookiePercent).
	// Only for a key with a cookie: part.
	CookieDecoding CookieDecoding `json:"cookieDecoding,omitempty"`
	Algorithm      Algorithm      `json:"algorithm"`
	// Rate is the number of requests (or cost units) per Period; for the
	// concurrency algorithm, the number in flight at once.
	Rate   int64    `json:"rate"`
	Period Duration `json:"period,omitempty"`
	// Burst is the token bucket's capacity or the leaky bucket's queue length;
	// zero means Rate.
	Burst int64 `json:"burst,omitempty"`
	// MaxDelay is how long a leaky-bucket request may wait for its turn. Zero
	// (nginx limit_req's nodelay) admits up to Burst units above the rate at
	// once, without waiting; a positive MaxDelay delays admitted requests
	// until the units ahead of them have drained, refusing longer waits.
	MaxDelay Duration `json:"maxDelay,omitempty"`
	// Cost is what one request consumes; nil means 1. Not for concurrency.
	Cost *Cost `json:"cost,omitempty"`
	// Scope is where the counters live; empty means ScopeNode. Cluster scope
	// supports token_bucket, sliding_window and fixed_window.
	Scope Scope `json:"scope,omitempty"`
	// Mode applies to cluster scope only; empty means ModeExact.
	Mode ClusterMode `json:"mode,omitempty"`
	// OnStoreError applies to cluster scope only; empty means OnStoreErrorLocal.
	OnStoreError StoreErrorPolicy `json:"onStoreError,omitempty"`
	// Bucket names a cluster budget shared across namespaces (cluster scope
	// only; token_bucket, sliding_window, fixed_window): every limit, in any
	// gateway or kind: service document, that names the same bucket with the
	// same algorithm, rate, period and burst spends one Redis budget per key,
	// where keys match by their parts' values in order (header:X-User and
	// sdk:user carrying one user id are one key). Without it a cluster
	// limit's budget is its namespace's and limit id's own. Limits naming
	// one bucket with other parameters keep apart budgets (never a mixed
	// one).
	Bucket string `json:"bucket,omitempty"`
	// Shadow limits decide, count and log, but never reject.
	Shadow bool `json:"shadow,omitempty"`
	// Exempt lists client CIDRs (or single addresses) that are never limited.
	Exempt []string `json:"exempt,omitempty"`
	// Response overrides the rejection; nil means status 429 and the default
	// problem+json body.
	Response *LimitResponse `json:"response,omitempty"`
	// Adaptive holds the adaptive algorithm's settings; nil means the
	// defaults (see AdaptiveSettings). Only for algorithm adaptive.
	Adaptive *AdaptiveSettings `json:"adaptive,omitempty"`
	// Reserve maps class ids to the share of this limit's capacity that
	// only requests of that class may use (see Class). Only for the
	// concurrency and adaptive algorithms.
	Reserve map[string]float64 `json:"reserve,omitempty"`
	// Variants give a share of clients (chosen by a stable hash of the
	// limit's key) other settings (see LimitVariant).
	Variants []LimitVariant `json:"variants,omitempty"`
	// Tiers give the callers whose verified claims match a tier other
	// rate, burst and period (see Tier); the first tier that matches
	// applies, a tier without match takes every other caller, and a caller
	// no tier takes gets the limit's own settings.
	Tiers []Tier `json:"tiers,omitempty"`
	// Calendar aligns a quota's period on the calendar in Timezone: day,
	// week (from Monday) or month. Only for algorithm quota, instead of
	// Period.
	Calendar Calendar `json:"calendar,omitempty"`
	// Timezone is the IANA time zone (time.LoadLocation) whose calendar a
	// quota's Calendar follows; empty means UTC. Only with Calendar.
	Timezone string `json:"timezone,omitempty"`
}

// CookieDecoding says how a limit's cookie:NAME key parts read the value.
type CookieDecoding string

// The cookie decodings of a limit.
const (
	CookiePercent CookieDecoding = "percent" // %XX escapes decoded ("+" kept); the default
	CookieRaw     CookieDecoding = "raw"     // the value as sent (less its double quotes)
)

// CookieDecodings lists every CookieDecoding.
var CookieDecodings = []CookieDecoding{CookiePercent, CookieRaw}

// DefaultIPv6Prefix is the prefix length IPv6 clients are keyed by in ip
// key parts when a limit sets no ipv6Prefix.
const DefaultIPv6Prefix = 64

// Cost says how much one request consumes. The zero value, like a nil *Cost,
// means 1 per request.
type Cost struct {
	// Header names a request header holding a positive integer cost.
	Header string `json:"header,omitempty"`
	// BodyBytesPerUnit charges one unit per this many bytes of request body
	// (Content-Length, rounded up, at least 1).
	BodyBytesPerUnit int64 `json:"bodyBytesPerUnit,omitempty"`
}

// LimitResponse overrides what a rejected request receives. Zero fields keep
// the defaults: status 429 and a problem+json body.
type LimitResponse struct {
	Status      int    `json:"status,omitempty"`
	Body        string `json:"body,omitempty"`
	ContentType string `json:"contentType,omitempty"`
}

// Breaker is a circuit breaker over the upstreams of its routes.
type Breaker struct {
	ID     string   `json:"id"`
	Routes []string `json:"routes,omitempty"`
	// Resources are the SDK resources the breaker guards (see
	// Limit.Resources); each has a breaker of its own.
	Resources []string `json:"resources,omitempty"`
	// Window is the rolling window over which ratios are computed. Required.
	Window Duration `json:"window"`
	// MinRequests is the number of requests in the window below which the
	// ratios are not judged; zero means DefaultBreakerMinRequests.
	MinRequests int `json:"minRequests,omitempty"`
	// ErrorRatio trips the breaker when failed/total reaches it; 0 is off.
	ErrorRatio       float64  `json:"errorRatio,omitempty"`
	SlowCallDuration Duration `json:"slowCallDuration,omitempty"`
	// SlowCallRatio trips the breaker when slow/total reaches it; 0 is off.
	SlowCallRatio float64 `json:"slowCallRatio,omitempty"`
	// ConsecutiveFailures trips the breaker after that many failures in a row; 0 is off.
	ConsecutiveFailures int `json:"consecutiveFailures,omitempty"`
	// OpenFor is how long the breaker stays open before probing; it doubles
	// after each failed probe, up to MaxOpenFor. Required.
	OpenFor Duration `json:"openFor"`
	// MaxOpenFor caps OpenFor's doubling; zero means OpenFor ×
	// DefaultMaxOpenForFactor.
	MaxOpenFor Duration `json:"maxOpenFor,omitempty"`
	// HalfOpenProbes is the number of requests let through while half open;
	// zero means DefaultHalfOpenProbes.
	HalfOpenProbes int `json:"halfOpenProbes,omitempty"`
	// FailureStatuses lists the upstream statuses counted as failures, besides
	// transport errors and timeouts; empty means every 5xx.
	FailureStatuses []int            `json:"failureStatuses,omitempty"`
	Fallback        *BreakerFallback `json:"fallback,omitempty"`
}

// BreakerFallback is the answer while a breaker is open. Zero Status means 503.
// RetryAfter, when zero, is the time left open.
type BreakerFallback struct {
	Status      int      `json:"status,omitempty"`
	RetryAfter  Duration `json:"retryAfter,omitempty"`
	Body        string   `json:"body,omitempty"`
	ContentType string   `json:"contentType,omitempty"`
}

// DegradeMode says who sets a degrade plan's level.
type DegradeMode string

// The degrade modes.
const (
	DegradeAuto   DegradeMode = "auto"
	DegradeManual DegradeMode = "manual"
)

// DegradeModes lists every DegradeMode.
var DegradeModes = []DegradeMode{DegradeAuto, DegradeManual}

// Degrade is a three-level degrade plan: 0 normal, 1 shed part of the traffic,
// 2 shed all of it, answering with the fallback.
type Degrade struct {
	ID     string   `json:"id"`
	Routes []string `json:"routes,omitempty"`
	// Resources are the SDK resources the plan applies to (see
	// Limit.Resources).
	Resources []string    `json:"resources,omitempty"`
	Mode      DegradeMode `json:"mode"`
	// Level is the manual level: 0, 1 or 2. Auto mode requires 0.
	Level int `json:"level,omitempty"`
	// Triggers are required in auto mode (at least one level); manual mode
	// keeps but ignores them.
	Triggers *DegradeTriggers `json:"triggers,omitempty"`
	// Window is the measuring window of automatic mode; zero means
	// DefaultDegradeWindow.
	Window Duration `json:"window,omitempty"`
	// Level1ShedRatio is the share of clients shed at level 1, in (0, 1];
	// zero means DefaultLevel1ShedRatio.
	Level1ShedRatio float64 `json:"level1ShedRatio,omitempty"`
	// RecoverAfter is the number of healthy windows before stepping down a
	// level; zero means DefaultRecoverAfter.
	RecoverAfter int `json:"recoverAfter,omitempty"`
	// Key is the client key that level 1 sheds consistently by (same
	// dimensions as Limit.Key); empty means [ip].
	Key      []string         `json:"key,omitempty"`
	Fallback *DegradeFallback `json:"fallback,omitempty"`
	// ShedOrder lists class ids (see Class) that level 1 sheds first, in
	// this order, before any other class; empty sheds clients of every
	// class alike.
	ShedOrder []string `json:"shedOrder,omitempty"`
}

// DegradeTriggers holds the conditions for each level; either may be nil.
type DegradeTriggers struct {
	Level1 *Trigger `json:"level1,omitempty"`
	Level2 *Trigger `json:"level2,omitempty"`
}

// Trigger fires when either of its set conditions holds over a window. A zero
// field is not checked; at least one must be set. Level 2's conditions may not
// be looser than level 1's (a lower qpsAbove, a higher successRateBelow).
type Trigger struct {
	QPSAbove         float64 `json:"qpsAbove,omitempty"`
	SuccessRateBelow float64 `json:"successRateBelow,omitempty"`
}

// DegradeFallback is what a shed request receives: HTML for browsers, JSON for
// API clients, otherwise the bare status. Zero Status means 503.
type DegradeFallback struct {
	HTML       string   `json:"html,omitempty"`
	JSON       RawJSON  `json:"json,omitempty"`
	Status     int      `json:"status,omitempty"`
	RetryAfter Duration `json:"retryAfter,omitempty"`
}

// Defaults applied by Normalize.
const (
	DefaultUpstreamTimeout    = 30 * time.Second
	DefaultBodyTimeout        = 10 * time.Second
	DefaultWriteTimeout       = 10 * time.Second
	DefaultPeriod             = time.Second
	DefaultBreakerMinRequests = 20
	DefaultHalfOpenProbes     = 1
	DefaultDegradeWindow      = 3 * time.Second
	DefaultLevel1ShedRatio    = 0.5
	DefaultRecoverAfter       = 5
	DefaultFallbackStatus     = 503
	DefaultLimitRejectStatus  = 429
	DefaultMaxOpenForFactor   = 8 // maxOpenFor = openFor × this when unset
	MaxRules                  = 100000
	MaxDocumentBytes          = 8 << 20
	MaxDocumentDepth          = 32
	MaxDocumentNodes          = 2_000_000
	MaxIDLength               = 63
	MaxTargetsPerRoute        = 256
	MaxKeyParts               = 8
	MaxRegexLength            = 1024
	MaxFallbackBodyBytes      = 64 << 10
	MaxUpstreamCABytes        = 64 << 10 // upstream.tls.ca
)
