// Package redislimit implements cluster-scope limits: counters that every
// gateway node shares through Redis (one server, Sentinel or Redis Cluster).
//
// The directory is limit/redis; the package is named redislimit so that it
// does not shadow go-redis's redis, which its callers often import too:
//
//	import redislimit "github.com/sluicegw/sluice/dataplane/limit/redis"
//
// # Wiring
//
// The gateway builds one Store from its flags and hands Store.Cluster(ns) to
// limit.Compile as Options.Cluster:
//
//	st, err := redislimit.New(ctx, redislimit.Settings{
//		URL:          *redisURL,      // --redis redis://[user:pass@]host:port[/db] (or ?master_name= for Sentinel)
//		ClusterAddrs: *redisCluster,  // --redis-cluster host:port,host:port,...
//		Prefix:       *redisPrefix,   // --redis-prefix (default "sluice:")
//		Timeout:      *redisTimeout,  // --redis-timeout (default 20ms)
//		ClusterSize:  *clusterSize,   // --cluster-size (default 1)
//		Nodes:        nodes.Count,    // optional (a *registry.Nodes: the live nodes); overrides ClusterSize
//		Metrics:      m,
//	})
//	defer st.Close()
//	opts.Cluster = st.Cluster(namespace)
//	... st.Status() in the node's /status
//
// New fails only on configuration errors (a malformed URL, both flags set),
// and its messages never show a password. A Redis that cannot be reached at
// start is not an error: the Store starts with its breaker open, every
// cluster limit decides by its onStoreError policy, and a prober pings Redis
// every ProbeEvery until it answers; then cluster limiting starts by itself.
//
// # Scripts, time and keys
//
// Each algorithm is one Lua script (token_bucket as GCRA, fixed_window,
// sliding_window as the two-window estimate), run with EVALSHA and reloaded
// with EVAL when Redis answers NOSCRIPT (go-redis Script.Run; after a
// SCRIPT FLUSH or a failover the next call reloads it). A script reads the
// time with Redis TIME: all nodes deciding on one key then read one clock,
// that of the Redis primary owning the key, while node clocks drift and
// step. Redis 7 replicates scripts by their effects (the default since Redis
// 5), which is what allows a script to read TIME and then write.
//
// A decision touches one hash per limited key,
//
//	<prefix><namespace>:{<limit id>:<key>}:<tb|fw|sw>
//
// except for a limit that names a shared bucket (bucket: NAME in a gateway
// or kind: service document), whose keys are
//
//	<prefix>~bucket:{<bucket>:<values>}:<tb|fw|sw>:<rate>/<period µs>/<burst>
//
// where <values> is the limited key without its parts' names: limits in
// any namespace naming one bucket with the same parameters share a budget,
// and ones with other parameters keep apart ones.
//
// whose {hash tag} covers the whole key, so Redis Cluster never answers
// CROSSSLOT and different keys spread over slots. Every write sets a TTL: a
// token bucket expires when it would be full again, a fixed window at its
// end, a sliding window after two periods. A changed rule reuses the key and
// rescales the stored fill to the new capacity.
//
// A key holding state no script writes (another type, a missing or
// non-numeric field, NaN, infinity, a negative count or one above the rate, a
// window or theoretical arrival time past what the clock allows, such as
// t=1e17, whether or not a PERSIST took its TTL) is repaired inside the script: it
// is deleted, the request is decided as for a fresh key, the fresh state is
// written with a TTL, and the Store counts the repair in
// sluice_store_repairs_total{store="redis"} and logs the key. Such a key
// would otherwise deny its client forever or fail every call. A repair admits
// at most what a fresh key would. ErrCorrupt remains for a reply the Store
// cannot read (a script of another version).
//
// # Exact and batched modes
//
// mode: exact runs the script on every Take. mode: batched takes a lease of
// units from the shared budget and spends it locally:
//
//   - A node refills a key's lease when it is spent or older than LeaseTTL;
//     one refill per key is in flight per node, and Takes arriving meanwhile
//     wait for it (up to Timeout) and are served from its result.
//   - The lease asks for ceil(observed rate on this node × LeaseTTL) units,
//     at least the cost and the demand of the waiting Takes, at most
//     Lmax = max(1, floor(C × LeaseFraction)), where C is the capacity
//     (burst for token_bucket, rate for the windows).
//   - Redis grants a full lease only while the budget left stays above
//     low = Lmax × nodes; below it, it grants just the demand of the Takes
//     waiting now: decisions become exact when the budget runs low.
//   - A refused refill is remembered until Redis' retry time (at most
//     LeaseTTL), so a saturated hot key costs Redis a number of calls that
//     follows the limit, not the offered load.
//   - Unused units of a token-bucket lease go back to Redis with the next
//     refill of that key (refunds too); unused units of a window lease are
//     dropped when the lease expires, and a fixed-window lease expires with
//     its window.
//
// Leased units are taken from the budget when leased, so the cluster never
// admits more than the budget in total; what batching adds is that units
// leased before an interval may be spent inside it. With N nodes, rate R per
// period P and capacity C, the units admitted across the cluster in ANY
// interval of length W satisfy
//
//	token_bucket:   admitted(W)      ≤ C + R·W/P + N·Lmax
//	fixed_window:   admitted(window) ≤ R                (a lease ends with its window)
//	sliding_window: admitted(P)      ≤ R + N·Lmax       (besides the two-window estimate's own error)
//
// (each node holds at most Lmax unspent units of a key), and units
// held by nodes that stop asking, at most N·Lmax, are the most a
// lease can under-admit. With the defaults (LeaseFraction 0.05) the extra
// over-admission is at most 5 % of the capacity per node.
//
// # Failures
//
// Every call has a deadline (Timeout, default 20 ms) and no retries. After
// FailuresToOpen consecutive failed calls the breaker opens: Takes stop
// calling Redis and decide at once by onStoreError: local (a limit.Local
// token bucket in memory with rate and capacity divided by the live nodes,
// Settings.Nodes or ClusterSize; when that count changes, each key's fill
// carries over as across a reload), allow or deny. One prober goroutine pings Redis every
// ProbeEvery, one ping at a time; the first answer closes the breaker and
// cluster limiting resumes. Every failed call counts in
// sluice_store_errors_total{store="redis"} and in Status. A caller whose own
// context ends (the client went away) gets an error that does not count
// against Redis. go-redis logs failed dials through its own logger
// (redis.SetLogger); the integrator may route or silence it.
//
// # Tests and benchmark
//
// Tests use the machine's Redis at 127.0.0.1:6379, a fresh key prefix each,
// and start private redis-servers on free loopback ports for a Redis
// Cluster, for outages and for the benchmark:
//
//	go test -race ./dataplane/limit/redis/...
//	go test -run '^$' -bench BenchmarkRedisLimit -benchtime 1s -count 5 ./dataplane/limit/redis/
package redislimit
