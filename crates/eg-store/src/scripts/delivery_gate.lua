-- The gate a sender passes before an attempt (or batch) of a subscription with
-- deliveryLimits, or now and then for any subscription to learn of a slowdown: the same
-- machine as eg_core::throttle::gate. Both keys share the subscription's hash tag, so the
-- script runs on Redis Cluster, and every sender shares one cap. In order:
--   slowed down (s > now)              -> {'SLOWED', s}
--   every slot in flight (leases ≥ max) -> {'FULL', earliest lease expiry}
--   the rate spent, its next turn within ARGV[9]
--                                      -> {'RESERVED', turn}: that turn taken for this
--                                          request (tat moves on), its lease from then
--   the rate spent (GCRA)              -> {'WAIT', turn}: the next waiting turn, one
--                                          interval after the last one handed out
--   otherwise                          -> {'GO', granted}, the lease taken if asked
--
-- KEYS[1]  the limit hash: t = theoretical arrival time (µs), p = next waiting turn (µs),
--          s = slowed until (ms); named in eg_store::throttle (rename nothing here alone)
-- KEYS[2]  the leases: sorted set, lease id -> expiry (ms)
-- ARGV[1]  now, ms (the caller's clock, corrected to Redis's)
-- ARGV[2]  interval between requests, µs (0: no rate)
-- ARGV[3]  burst
-- ARGV[4]  requests wanted at once
-- ARGV[5]  most requests in flight (0: no cap)
-- ARGV[6]  lease id for this attempt ('' for none)
-- ARGV[7]  lease length, ms
-- ARGV[8]  key expiry, ms (refreshed whenever a key is written)
-- ARGV[9]  how far ahead a turn may be reserved, ms (0: never)
local now = tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 't', 'p', 's')
if h[3] and tonumber(h[3]) > now then
  return {'SLOWED', h[3]}
end
local max = tonumber(ARGV[5])
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= max then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'FULL', first[2]}
  end
end
local want = math.max(tonumber(ARGV[4]), 1)
local granted = want
local reserved = nil
local t = tonumber(ARGV[2])
if t > 0 then
  local now_us = now * 1000
  local tau = (tonumber(ARGV[3]) - 1) * t
  local tat = math.max(tonumber(h[1] or '0'), now_us)
  local ahead = tat - now_us
  if ahead > tau then
    local first = tat - tau
    if first - now_us > tonumber(ARGV[9]) * 1000 then
      local turn = math.max(tonumber(h[2] or '0'), first)
      redis.call('HSET', KEYS[1], 'p', string.format('%d', turn + t))
      redis.call('PEXPIRE', KEYS[1], ARGV[8])
      return {'WAIT', string.format('%d', math.ceil(turn / 1000))}
    end
    reserved = math.ceil(first / 1000)
    granted = 1
  else
    granted = math.min(want, math.floor((tau - ahead) / t) + 1)
  end
  redis.call('HSET', KEYS[1], 't', string.format('%d', tat + granted * t))
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
end
if max > 0 and ARGV[6] ~= '' then
  redis.call('ZADD', KEYS[2], (reserved or now) + tonumber(ARGV[7]), ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[8])
end
if reserved then
  return {'RESERVED', string.format('%d', reserved)}
end
return {'GO', string.format('%d', granted)}
