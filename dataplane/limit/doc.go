// Package limit holds the gateway's node-local rate and concurrency limiters:
// the algorithms, the keyed state they keep in bounded memory, key and cost
// extraction from requests, the stacked evaluation of every limit that
// applies to a route, the 429 response, and hot swap with state kept.
//
// # Integration
//
//	set, err := limit.Compile(valid.Rules().Limits, current, limit.Options{
//		Metrics: m, Logger: jsonLogger, Cluster: redisFactory /* nil without --redis */})
//	// on error: keep current, count sluice_ruleset_apply_errors_total
//	ptr.Store(set); current.Retire(set)        // swap, then retire the old Set
//	...
//	// per request, right after route matching, on the request's one view
//	// (package reqview: route, client IP, request id, trace context):
//	done, ok := ptr.Load().Chain(route.ID).AdmitView(w, &view)
//	// or, from a bare *http.Request:
//	done, ok := ptr.Load().Chain(route.ID).Admit(w, r, limit.RequestInfo{
//		RouteID: route.ID, ClientIP: api.ClientIP(peer, r.Header.Values("X-Forwarded-For"), trusted),
//		RequestID: reqID})
//	if !ok { return }                          // the rejection is written
//	defer done()                               // releases concurrency slots
//
// Every Set owns one sweeper goroutine (forgetting idle keys every
// Options.SweepInterval); Retire or Close stops it. A Set that is compiled
// but never swapped in must be Closed.
//
// # Time
//
// A Limiter takes the time as a parameter (now, in nanoseconds on Now's
// scale), so tests never sleep. A Chain reads Options.Now itself: once when
// it admits a request, and again when it gives units back (done, or a
// leaky-bucket wait that ends early); tests set Options.Now to a clock of
// their own. Now is package internal/clock's: the runtime's monotonic clock
// (runtime.nanotime, cheaper than time.Now, which also reads the wall
// clock), the one scale of breaker.Now and degrade.Now too, so that the
// snapshot's reading of a request's start means the same to all three.
//
// # Algorithms
//
// Rates are "rate units per period"; a request costs 1 unit unless the limit
// has a cost rule. A request whose cost exceeds the capacity (burst, or rate
// for windows) is never admitted; its RetryAfter is the time a key takes to
// refill completely (at least 1s once rounded), not a false promise.
//
//   - token_bucket: a bucket of burst tokens refilled continuously, one token
//     every t = period/rate ns (rounded to the nearest ns, at least 1: the
//     rate is exact when rate divides the period in ns, and otherwise off by
//     at most 0.5 ns per token, a relative 0.5/t: 5e-7 near 1000/s, 5e-4
//     near 1e6/s). It is kept as
//     GCRA virtual scheduling, which is exactly this token bucket: the state
//     is the theoretical arrival time TAT, the instant the bucket is full
//     again; the bucket holds burst − (TAT−now)/t tokens, n tokens are taken
//     iff max(TAT,now) + n·t − now ≤ burst·t, and TAT moves by n·t. One int64
//     per key: a global bucket is updated with one compare-and-swap, no lock.
//   - leaky_bucket: a queue of burst units draining one unit every t ns,
//     nginx limit_req burst=. A request joins the queue iff the queue with
//     its units holds at most burst units. With maxDelay 0 (the default,
//     nginx's nodelay) it is admitted at once: the queue absorbs bursts of up
//     to burst units above the rate and drains at the rate, so under overload
//     it admits burst + rate·elapsed units, as a token bucket of capacity
//     burst does. With maxDelay > 0 (nginx without nodelay) it is scheduled
//     after the units ahead of it and admitted iff that wait is at most
//     maxDelay too. Decision.Delay is the wait; Admit waits it out (Wait)
//     only after every other limit passed. A client that goes away while
//     waiting gets its units refunded: the next request takes its place.
//   - fixed_window: at most rate units per window; windows are aligned on
//     multiples of period on the Now scale.
//   - sliding_window: the sliding-window counter over two fixed windows. At
//     elapsed e into window k it estimates the count over the last period as
//     prev·(P−e)/P + cur (prev, cur: counts of windows k−1 and k) and admits
//     while that plus the cost is at most rate (computed exactly in 128-bit
//     integers). Error bound: the true count over (now−P, now] is cur plus
//     the part of prev that fell in the last P−e of window k−1, so the
//     estimate exceeds it by at most (1−e/P)·prev and falls short by at most
//     (e/P)·prev; it is exact when window k−1's traffic was uniform. Hence
//     it may reject while the true count is as low as rate − (1−e/P)·prev,
//     and any interval of length P admits at most 2·rate units (each fixed
//     window admits at most rate, and the estimate never admits more in
//     window k than rate − (1−e/P)·prev). TestSlidingWindowErrorBound checks
//     the bound against an exact log.
//   - concurrency: at most rate requests in flight per key. Admit returns a
//     done func that gives the slot back; the caller defers it, so completion,
//     client cancellation and panics all release. RetryAfter is 1s (a slot's
//     release depends on requests, not a clock).
//
// Refund gives units back exactly (TAT moves back; counts decrease; in-flight
// decreases).
//
// # Keyed state
//
// A limit keyed only by global has one state and no table. Otherwise keys
// are hashed to 64 bits (hash/maphash, one random seed per process) and only
// the hash is stored: slot = hash + two int64 of state, 24 bytes, in
// open-addressing tables (linear probing, backward-shift deletion) spread
// over up to 256 shards, each with its own mutex. A full shard runs at load
// 3/4: 32 bytes per key; the heap at 1M keys measures about 35 bytes per key,
// index included (BenchmarkKeyed1M). Two distinct keys whose 63-bit hashes
// collide share a state (stricter, never looser for both); with n live keys
// the chance that any pair collides is about n²/2^64, 6e-8 at 1M keys.
//
// Idle keys are forgotten: a key whose state equals a fresh key's (bucket
// full, window over, nothing in flight) decides exactly as an absent key, so
// dropping it changes no decision. The Set's sweeper drops them every
// SweepInterval. MaxKeys
// caps the keys per limit (split evenly over the shards: each holds at most
// ceil(MaxKeys/shards)). At the cap a new key evicts by CLOCK (second
// chance): each use of a key sets its reference bit; the shard's hand walks
// the table, clearing bits, and evicts the first key that is idle or not
// used since the hand last passed it. "Least recently used" here means: not used during the
// hand's last lap of its shard. An evicted key that comes back starts fresh
// (a full bucket), the price of a bounded memory under a key flood.
//
// # Keys and costs
//
// Keys are compiled by classify.ParseKey into a classify.Key, which degrade
// plans use too (one reading of key parts for every rule, in package
// classify beside reqview; what each part means is documented in package
// reqview), and read from the request's reqview.View.
// Key dimensions: ip (View.ClientIP, computed by the caller with
// api.ClientIP; X-Forwarded-For is never read here; IPv4-mapped IPv6 is the
// IPv4 client; an IPv6 client is keyed by its /ipv6Prefix, default /64, see
// api.KeyAddr, while exempt matches its whole address), route, global,
// header:NAME (as sent: no stack decodes a header value), query:NAME
// (percent-decoded, "+" a space), cookie:NAME (without double quotes,
// percent-decoded as PHP's $_COOKIE and Express read it, "+" kept:
// reqview.DecodeCookie; raw for a limit with cookieDecoding: raw, for
// upstreams that read the value as sent); several form a composite key, hashed with length prefixes so that
// parts cannot run together. A missing part (absent header, parameter or
// cookie, or no client address) hashes as a "missing" marker distinct from
// every value; an empty value is missing too (Python's parse_qs drops
// "?user=", most applications treat an empty header as none): every request
// that omits it shares one key (with its other parts). Omitting a header
// therefore never escapes a limit; it lands in one shared, and so quickly
// exhausted, bucket. Building the key does not allocate (except to decode a
// percent-encoded query value or cookie). Cluster limiters receive the key as text:
// "ip=192.0.2.1|header:X-User=#…", an IPv6 client as its prefix
// ("ip=2001:db8:1:2::/64"), a missing part as "<missing>".
//
// # Ambiguous key parts
//
// A key must read exactly what the upstream acts on, or a client could send
// a value the gateway keys on beside another that the upstream reads. So a
// request is refused with 400 application/problem+json naming the part
// (classify.KeyCheck.ReadView, run by the integrator after routing and
// before degrade and limits, so that it consumes nothing; the values it
// checked are recorded in the request's reqview.View and are then what
// degrade and limits key on, so the request is parsed once) when a query,
// header or cookie part that one of its route's limits or degrade plans
// keys on is:
//
//   - repeated: query:NAME in two pairs (names compared after
//     percent-decoding and ignoring case, as some stacks compare them), a
//     header in two field lines (any case), a cookie twice (any case), or
//     the Cookie header in two lines (HTTP/1.1; HTTP/2's split cookie fields
//     are joined first). Parsers disagree on which one wins: Go and Flask
//     take the first, PHP and Python's http.cookies the last, Node joins
//     headers;
//   - not spelled exactly NAME: another case ("User"), percent-encoding or
//     "+" in a name that needs none ("us%65r"), a NUL after it ("user%00x",
//     which C strings end at), white space around a cookie
//     name ("sid =x", which Go trims and others keep), or a header sent under
//     an alias that CGI/WSGI/PHP upstreams map to the same variable
//     ("X_Api_Key" beside "X-Api-Key");
//   - malformed where the limit reads it: a query pair with ";" (net/url
//     drops the whole pair, other parsers split it), a bad percent-escape
//     ("%zz", dropped by net/url and httputil.ReverseProxy), a decoded value
//     with a control character (NUL) or invalid UTF-8 (Python reads every
//     invalid sequence as U+FFFD), a header value with a control character
//     (a tab inside) or invalid UTF-8, a cookie without "=" or with a byte
//     that is not an RFC 6265 cookie-octet or is "[" or "]" (Python's parser
//     stops there), double quotes around it excepted; and a cookie keyed
//     percent-decoded whose decoders could disagree (reqview.DecodeCookie):
//     valid and malformed escapes together ("%61%zz": PHP decodes the valid
//     ones, Express keeps the raw value), a decoded control character or
//     invalid UTF-8, or a value still percent-encoded once decoded
//     ("%2561", double encoding);
//   - not forwarded: a keyed header, or Cookie, named in Connection (the
//     proxy removes such headers);
//   - beyond what the upstream reads: more than classify.MaxQueryParams parameters,
//     more than classify.MaxCookies cookies.
//
// A comma inside one header line is part of the value, as every common
// stack reads a single line; only repeated lines are refused. Parameters,
// headers and cookies no limit keys on are never checked, and repeated
// ones (?tag=a&tag=b) pass. What passes the check is forwarded such that
// net/url, net/http and Python's urllib.parse and http.cookies each read
// the one value the gateway keyed on, and PHP's $_COOKIE and Express read the
// one decoded cookie value it keyed on (FuzzKeyExtraction and the gateway's
// TestKeysReadWhatUpstreamReads check it).
//
// Cost (see costSpec.cost): from a header, a decimal integer; missing,
// malformed or < 1 costs 1 (the least, so garbling gains nothing); too large
// for int64 is rejected. From bodyBytesPerUnit: Content-Length divided by it,
// rounded up, at least 1; a body of unknown length (chunked) is charged the
// limit's whole capacity, since it cannot be measured before it is read.
//
// exempt CIDRs skip the limit (decision "exempt"). shadow limits decide,
// count ("shadow_reject") and log, but never reject, never delay, and are not
// advertised in headers.
//
// # Stacked limits
//
// Every limit whose routes match applies, in rule order, except that
// concurrency limits come after rate limits and leaky buckets last. The
// first rejection stops evaluation; units already taken are refunded, so a
// rejected request consumes nothing. A concurrency or leaky-bucket slot is
// taken before the wait and refunded if the client leaves.
//
// # Responses
//
// A rejection is status 429 (or the rule's response status), Retry-After in
// whole seconds rounded up (at least 1), the RateLimit headers below, and an
// application/problem+json body {type, title, status, detail, rule,
// requestId} (or the rule's response body and content type). Allowed
// responses carry the RateLimit headers of the tightest limit: the
// non-shadow limit with the least remaining share (remaining ÷ limit), ties
// to fewer remaining, then to evaluation order. Headers follow
// draft-ietf-httpapi-ratelimit-headers-10 (the syntax since -08):
//
//	RateLimit-Policy: "<id>";q=<quota>;w=<window seconds>
//	RateLimit: "<id>";r=<remaining>;t=<seconds until reset>
//	X-RateLimit-Limit: <quota>, X-RateLimit-Remaining, X-RateLimit-Reset (seconds)
//
// w is the period in whole seconds, rounded up, with q scaled to it (10 per
// 100ms reads q=100;w=1). Reset is when the key is full again (buckets) or
// the current window ends (windows). Concurrency limits have no w and no t.
//
// Every rejection, shadow ones included, is logged (slog, the caller's
// handler) with request_id, rule, key, limit and remaining, through a token
// bucket of log lines (Options.LogsPerSecond, LogBurst, shared by all limits
// and carried across Sets); dropped lines count in sluice_log_dropped_total.
//
// # Hot swap
//
// Compile(limits, prev, opts) compares each limit's canonical JSON (after
// Normalize) with prev's limit of the same id. Unchanged: the very same
// limiter, state and metrics are carried. Changed, node scope, same key
// dimensions: a new limiter whose keys start with their current fill, scaled
// to the new capacity, neither refilled nor emptied. Fill is: tokens missing
// ÷ burst (token bucket), queued units ÷ burst (leaky bucket), count ÷ rate
// in the current window (fixed window), each window's count ÷ rate
// (sliding window with the same period; otherwise its estimate ÷ rate), and
// for concurrency the in-flight count itself, unscaled: the new limiter shares
// the old counters so that requests admitted before the swap release into
// it. A fill cannot be carried across different key dimensions, between
// concurrency and a rate algorithm, or into or out of cluster scope: those
// start fresh. The copy is a snapshot taken during Compile: units taken on
// the old Set between Compile and the swap are not carried.
//
// Cluster limits come from Options.Cluster; without it Compile fails with
// "limits[i]: scope cluster needs --redis on this node". Retire(next) stops
// the old Set's sweeper and closes (io.Closer) the cluster limiters next did
// not carry over.
//
// # Adaptive limits
//
// algorithm: adaptive is a concurrency limit (at most L requests in flight
// per key, released by done as for concurrency) whose L a gradient
// controller moves with the upstream's latency (adaptive.go). Each finished
// request gives a round-trip sample: from its admission (after a
// leaky-bucket wait, if any) to done. Samples go into a log-linear
// histogram (8 buckets per power of two, about 9% wide; lock-free atomics,
// no allocation). A window (adaptive.window) closes at the first sample
// after its end once it holds at least 10 samples (a quieter window is
// extended, not judged); the request that closes it computes:
//
//	sample   = the window's percentile (adaptive.percentile) RTT
//	minRTT   = min(minRTT, sample)
//	gradient = clamp(minRTT·(1+buffer) / sample, 0.5, 1)
//	next     = L·gradient + √L                  the queue allowance
//	L        = clamp(L·0.5 + next·0.5, minLimit, maxLimit)
//
// so L grows by about √L/2 per window while latency stays within the buffer
// of the best seen, and shrinks by up to a quarter per window when it does
// not. A window in which the key's in-flight count never reached L/2 does not
// raise L (an idle limit would otherwise creep up to maxLimit and protect
// nothing when load arrives). minRTT and sample are the same percentile, so
// the upstream's natural spread does not read as queueing.
//
// The minimum RTT is measured again every adaptive.probeInterval ±25%
// (random jitter, so that nodes and limits do not probe together), and
// right at the start: the probe window runs at half the limit (never below
// minLimit, so a probe refuses no more than a limit pinned at minLimit
// would, and usually much less: Envoy pins the limit at its minimum for the
// whole measurement), and its sample becomes minRTT if it is lower. A higher
// probe sample replaces minRTT only when the probe ran at minLimit: the
// limit had nowhere lower to go, so the latency is the upstream's own (it
// became slower for good) and judging it against a latency it can no longer
// reach would pin L at minLimit forever. Above minLimit a higher probe
// sample may be queueing (half the limit still above capacity, or a
// backlog draining) and taking it would let the limit ratchet up from probe
// to probe, the creep users of other gradient limiters report under
// moderate overload. A probe that lowered minRTT by more than 10% is
// repeated 4 windows later, so that a minimum first measured under load
// settles quickly. After a probe the limit is restored. The limit in force
// is exported as sluice_limit_adaptive_limit{rule,variant} and in the
// node's /status (Set.Adaptive).
//
// Shadow: an adaptive limit with shadow: true admits everything, counts and
// logs what it would have refused, and its controller learns from the
// unlimited traffic (its L is what it would enforce).
//
// Failure modes, by design or known:
//
//   - One controller per limit (per variant): the upstream's latency is one
//     signal, so the limit L applies to each key of the limit, not a
//     controller per key. With key [global] (the common case) that is one
//     limit for the upstream; keyed by client it bounds each client to L.
//   - RTT is measured in the gateway from admission to done, so a slow
//     client (the response write) or the limits after it in the chain add
//     to it: the limit is conservative, never looser.
//   - The buffer must cover the upstream's jitter between windows: with a
//     very small buffer and a noisy upstream L drifts down (safe, but it
//     underuses the upstream).
//   - An initial limit far above capacity needs a few probes (repeated
//     quickly while minRTT falls) before minRTT is right; meanwhile L sits
//     above what the latency target allows. Start low.
//   - A window with fewer than 10 samples is not judged, so a limit on a
//     route with a request every few seconds adapts slowly.
//   - When the upstream becomes slower for good, L falls to minLimit and
//     stays there until the next probe (within probeInterval ±25%) measures
//     the new latency at minLimit; in that time it refuses what a limit of
//     minLimit would.
//   - State is per node: N nodes each learn their own L.
//
// # Priority classes and reserved capacity
//
// The rule set's classes (api.Class, compiled by classify.NewClasses) give
// each request a class index (classify.Classes.Classify: the first class
// that matches, else 0, "default"), which the integrator passes as
// RequestInfo.Class. A class that matches headers matches only a request whose peer is a trusted
// proxy (reqview.View.TrustedPeer, RequestInfo.TrustedPeer, set where the
// client address is computed): any client can send X-Priority: critical,
// so from any other peer the header is ignored for the match (and still
// forwarded). Routes and methods match from anyone. A
// concurrency or adaptive limit with reserve splits its capacity C (for
// adaptive, the current L) into a pool per reserved class, floor(share·C)
// (at most 65,535; at most 4 reserved classes per limit), and an unreserved
// pool of the rest. A request of a reserved class takes from its own pool
// while it has room, then from the unreserved one; any other request only
// from the unreserved one. Pools are counted in the key's state under the
// shard's lock, so a take is atomic: no pool, and so not the key, ever holds
// more than its size (TestReserveNeverOverAdmits: 64 goroutines, -race).
// done gives the slot back to the pool it came from (Decision.Pool). The
// decisions of a limit with a reserve are counted per class
// (sluice_limit_decisions_total{class}); every rejection log line carries
// the request's class.
//
// # Variants
//
// A limit's variants (api.LimitVariant; variants.go) give weight percent of
// its clients the limit with the variant's settings (api.Limit.WithVariant),
// with its own limiter and counters. A client's variant is fixed by
// FNV-1a(limit id, 0, key text) mod 100 (VariantBucket): no seed, so the
// same client gets the same variant on every node and after every restart.
// Computing it builds the key's text, one allocation per request on limits
// with variants only. Their decisions carry variant="<id>" or "base" on
// sluice_limit_decisions_total, and the rejection log line the variant.
package limit
