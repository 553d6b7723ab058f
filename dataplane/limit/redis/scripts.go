package redislimit

import "github.com/redis/go-redis/v9"

// Every script takes one key (KEYS[1], a hash) and the same arguments:
//
//	ARGV[1] period in microseconds
//	ARGV[2] rate: units per period
//	ARGV[3] burst: capacity in units (token bucket only; windows use rate)
//	ARGV[4] want: the most units to grant (a lease), >= need
//	ARGV[5] need: the fewest units to grant, or none (0 = take nothing)
//	ARGV[6] demand: units wanted by requests waiting right now (<= want)
//	ARGV[7] low: budget to leave untouched before granting more than demand
//	ARGV[8] ret: units to give back first (refunds, unused leases)
//
// and answer {granted, remaining, reset µs, retry µs, repaired}: granted is 0
// or in [need, want]; remaining is the budget left after the grant; reset is
// how long until the key's quota is whole again (or its window ends); retry
// is, when nothing was granted, how long until need units could be, or -1
// when need can never be granted (need > capacity); repaired is 1 when the
// key held state no script could have written and was rewritten from scratch.
//
// Time comes from Redis TIME, so every gateway node that shares a key reads
// one clock: the clock of the Redis primary that owns the key. Node clocks
// drift and jump; a counter whose windows each node computed from its own
// clock would let nodes disagree on which window they are in. Redis 7
// replicates scripts by their effects (the default since Redis 5), so a
// script may read TIME and then write.
//
// Scripts never trust what they read. A key of another type (WRONGTYPE), a
// missing or non-numeric field, NaN, an infinity, a negative count, a count
// above its rate, or a window or theoretical arrival time beyond what the
// clock allows (t=1e17) is impossible state: left alone, and made permanent
// by a PERSIST, it would deny that client forever or fail every call, so the
// script deletes the key, decides as for a fresh key, writes the fresh state
// with a TTL, and answers repaired = 1, which the Store counts
// (sluice_store_repairs_total) and logs. A repair admits at most what a fresh
// key would. A key that only lost its TTL but holds possible values needs no
// repair: its values decay with the clock like any key's, and the next write
// sets a TTL again (no TTL check costs a call per decision).
//
// Lua numbers are doubles: microseconds since the epoch (~1.7e15) are exact
// below 2^53. Values are written with %.17g so that none loses precision.

// grantLua is the part every script shares: given avail (units available),
// decide the grant. A full lease is granted while the budget stays above low;
// below it only the current demand (exact decisions); never less than need.
const grantLua = `
local granted = 0
if need > 0 and avail >= need then
  granted = want
  if granted > avail - low then granted = avail - low end
  if granted < demand then granted = math.min(demand, avail) end
  if granted < need then granted = need end
end
`

const headLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local period, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, need, demand = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local low, ret = tonumber(ARGV[7]), tonumber(ARGV[8])
local function bad(x)
  return x == nil or x ~= x or x == math.huge or x == -math.huge
end
local function fmt(x) return string.format('%.17g', x) end
local repaired = 0
local function repair()
  redis.call('DEL', KEYS[1])
  repaired = 1
end
-- fetch reads the key's fields; nil when it is absent, of another type
-- (repaired) or holds none of them.
local function fetch(...)
  local st = redis.pcall('HMGET', KEYS[1], ...)
  if type(st) == 'table' and st.err then
    repair()
    return nil
  end
  for i = 1, select('#', ...) do
    if st[i] then return st end
  end
  return nil
end
`

// tokenBucketLua is GCRA: the hash holds t, the theoretical arrival time (the
// Redis time at which the bucket is full again), and c, the capacity window
// (burst × emission interval) t was computed under, so that a changed rule
// rescales the fill instead of resetting it.
const tokenBucketLua = headLua + `
local T = period / rate
local tau = burst * T
local st = fetch('t', 'c')
local tat = now
if st then
  local x, c = tonumber(st[1]), tonumber(st[2])
  if bad(x) or bad(c) or c <= 0 or x - now > c + 1 then
    repair()
  else
    if c ~= tau and x > now then x = now + (x - now) * tau / c end
    if x > tat then tat = x end
    if tat > now + tau then tat = now + tau end
  end
end
if ret > 0 then
  tat = tat - ret * T
  if tat < now then tat = now end
end
local avail = math.floor((now + tau - tat) / T + 1e-6)
` + grantLua + `
tat = tat + granted * T
if granted > 0 or ret > 0 or repaired == 1 then
  redis.call('HSET', KEYS[1], 't', fmt(tat), 'c', fmt(tau))
  redis.call('PEXPIRE', KEYS[1], math.ceil((tat - now) / 1000) + 1)
end
local retry = 0
if granted == 0 and need > 0 then
  if need > burst then retry = -1 else retry = math.ceil(tat + need * T - tau - now) end
end
return {granted, avail - granted, math.ceil(tat - now), retry, repaired}
`

// fixedWindowLua counts units per window of the Redis clock: w is the window
// index, n the units counted in it, l the rate n was counted under.
const fixedWindowLua = headLua + `
local win = math.floor(now / period)
local st = fetch('w', 'n', 'l')
local n = 0
if st then
  local w, c, l = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  if bad(w) or bad(c) or bad(l) or c < 0 or l <= 0 or c > l or w > win then
    repair()
  elseif w == win then
    n = c
    if l ~= rate then n = math.ceil(c * rate / l) end
  end
end
if ret > 0 then
  n = n - ret
  if n < 0 then n = 0 end
end
local avail = rate - n
` + grantLua + `
n = n + granted
local reset = (win + 1) * period - now
if granted > 0 or ret > 0 or repaired == 1 then
  redis.call('HSET', KEYS[1], 'w', fmt(win), 'n', fmt(n), 'l', fmt(rate))
  redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000) + 1)
end
local retry = 0
if granted == 0 and need > 0 then
  if need > rate then retry = -1 else retry = math.ceil(reset) end
end
local left = rate - n
if left < 0 then left = 0 end
return {granted, left, math.ceil(reset), retry, repaired}
`

// slidingWindowLua estimates the units of the last period from two fixed
// windows: the previous one weighted by how much of it the sliding period
// still covers, plus the current one. w is the current window index, c its
// count, p the previous window's count, l the rate they were counted under.
const slidingWindowLua = headLua + `
local win = math.floor(now / period)
local el = now - win * period
local st = fetch('w', 'c', 'p', 'l')
local cur, prev = 0, 0
if st then
  local w, c, p, l = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
  if bad(w) or bad(c) or bad(p) or bad(l) or c < 0 or p < 0 or l <= 0 or
      c > l * (1 + 1e-9) + 1e-6 or p > l * (1 + 1e-9) + 1e-6 or w > win then
    repair()
  else
    local s = rate / l
    if w == win then cur, prev = c * s, p * s elseif w == win - 1 then prev = c * s end
  end
end
if ret > 0 then
  cur = cur - ret
  if cur < 0 then cur = 0 end
end
local est = prev * (period - el) / period + cur
local avail = math.floor(rate - est + 1e-6)
if avail < 0 then avail = 0 end
` + grantLua + `
cur = cur + granted
if granted > 0 or ret > 0 or repaired == 1 then
  redis.call('HSET', KEYS[1], 'w', fmt(win), 'c', fmt(cur), 'p', fmt(prev), 'l', fmt(rate))
  redis.call('PEXPIRE', KEYS[1], math.ceil((2 * period - el) / 1000) + 1)
end
local reset = 0
if cur > 0 then reset = 2 * period - el elseif prev > 0 then reset = period - el end
local retry = 0
if granted == 0 and need > 0 then
  if need > rate then
    retry = -1
  else
    local room = rate - need - cur
    if prev > 0 and room >= 0 then
      retry = period * (1 - room / prev) - el
    else
      retry = period - el
      if cur > 0 then retry = retry + period * (1 - (rate - need) / cur) end
    end
    if retry < 1 then retry = 1 end
  end
end
local left = avail - granted
if left < 0 then left = 0 end
return {granted, left, math.ceil(reset), math.ceil(retry), repaired}
`

// The scripts, run with EVALSHA and reloaded with EVAL on NOSCRIPT
// (redis.Script.Run does both).
var (
	tokenBucketScript   = redis.NewScript(tokenBucketLua)
	fixedWindowScript   = redis.NewScript(fixedWindowLua)
	slidingWindowScript = redis.NewScript(slidingWindowLua)
)
