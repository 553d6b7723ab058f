package redislimit

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/limit"
)

// peerTokenBucketLua is the named peer of the benchmark: the token bucket
// Spring Cloud Gateway's RedisRateLimiter runs, written here from its
// description (not copied): two keys, tokens and the time of the last
// refill; refill by elapsed time × rate, compare with the request, write
// both back with a TTL of twice the fill time; one EVALSHA per request.
// KEYS: tokens key, timestamp key. ARGV: rate per second, capacity, requested.
const peerTokenBucketLua = `
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local requested = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = math.floor(capacity / rate * 2)
if ttl < 1 then ttl = 1 end
local tokens = tonumber(redis.call('GET', KEYS[1]))
if tokens == nil then tokens = capacity end
local last = tonumber(redis.call('GET', KEYS[2]))
if last == nil then last = 0 end
local elapsed = math.max(0, now - last)
local filled = math.min(capacity, tokens + elapsed * rate)
local allowed = 0
if filled >= requested then
  filled = filled - requested
  allowed = 1
end
redis.call('SETEX', KEYS[1], ttl, filled)
redis.call('SETEX', KEYS[2], ttl, now)
return {allowed, filled}
`

var peerTokenBucket = redis.NewScript(peerTokenBucketLua)

// BenchmarkRedisLimit compares, on one private redis-server, the peer token
// bucket (one EVALSHA per request), Sluice exact and Sluice batched, all on
// a token bucket per key over 16 keys, 16 goroutines: under-limit at
// 1,000,000/s per key (nothing is refused, so decisions/s measures the cost
// of deciding) and over-limit at 100/s per key (most requests refused). It reports decisions/s,
// p50/p99 decision latency, Redis script calls per admitted request and the
// script's usec_per_call, read from INFO commandstats after CONFIG RESETSTAT.
//
//	go test -run '^$' -bench BenchmarkRedisLimit -benchtime 1s -count 5 ./dataplane/limit/redis/
func BenchmarkRedisLimit(b *testing.B) {
	srv := startRedis(b, 0)
	admin := srv.client(b)
	ctx := context.Background()
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
	}
	peerClient := srv.client(b)
	for _, w := range []struct {
		name string
		rate int64
	}{
		{"under-limit", 1_000_000}, // nothing refused: the cost of deciding
		{"over-limit", 100},        // most refused: saturated keys
	} {
		rate := w.rate
		peer := func(ctx context.Context, key string) (bool, error) {
			v, err := peerTokenBucket.Run(ctx, peerClient, []string{"peer:" + w.name + ":{" + key + "}:tokens", "peer:" + w.name + ":{" + key + "}:ts"}, rate, rate, 1).Int64Slice()
			if err != nil {
				return false, err
			}
			return v[0] == 1, nil
		}
		sluice := func(mode api.ClusterMode) func(context.Context, string) (bool, error) {
			// A 1 s deadline, like the peer's go-redis defaults, measures
			// throughput rather than the deadline on a busy two-core machine.
			st := mustStore(b, Settings{URL: srv.url(), Prefix: "sluice:" + w.name + ":" + string(mode) + ":", Timeout: time.Second})
			lim := mustLimiter(b, st, api.Limit{ID: "bench", Algorithm: api.TokenBucket, Rate: rate, Period: api.Duration(time.Second), Mode: mode})
			return func(ctx context.Context, key string) (bool, error) {
				d, err := lim.Take(ctx, key, 1, limit.Now())
				return d.Allowed, err
			}
		}
		for _, bc := range []struct {
			name string
			take func(context.Context, string) (bool, error)
		}{
			{w.name + "/peer-scg-token-bucket", peer},
			{w.name + "/sluice-exact", sluice(api.ModeExact)},
			{w.name + "/sluice-batched", sluice(api.ModeBatched)},
		} {
			b.Run(bc.name, func(b *testing.B) {
				if err := admin.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				var admitted, failed atomic.Int64
				var mu sync.Mutex
				var lat []time.Duration
				var next atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					local := make([]time.Duration, 0, 1<<16)
					k := int(next.Add(1))
					for pb.Next() {
						k++
						t0 := time.Now()
						ok, err := bc.take(ctx, keys[k%len(keys)])
						if len(local) < cap(local) {
							local = append(local, time.Since(t0))
						}
						if err != nil {
							failed.Add(1)
						} else if ok {
							admitted.Add(1)
						}
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				})
				elapsed := time.Since(start)
				b.StopTimer()
				if failed.Load() > 0 {
					b.Errorf("%d store errors", failed.Load())
				}
				stats := commandStats(b, admin)
				calls := stats["evalsha"].calls + stats["eval"].calls
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
				b.ReportMetric(float64(calls)/float64(max(admitted.Load(), 1)), "calls/admitted")
				b.ReportMetric(stats["evalsha"].usecPerCall, "script-usec/call")
				b.ReportMetric(float64(admitted.Load())/elapsed.Seconds(), "admitted/s")
			})
		}
	}
}

type cmdStat struct {
	calls       int64
	usecPerCall float64
}

// commandStats parses INFO commandstats.
func commandStats(tb testing.TB, c *redis.Client) map[string]cmdStat {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				s.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				s.usecPerCall, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	if len(out) == 0 {
		tb.Fatalf("no command stats in %q", fmt.Sprint(info))
	}
	return out
}
