-- After an attempt of a throttled subscription: ends its lease and, on a busy answer
-- (429/503) with Retry-After, slows the whole subscription for the time asked (at most the
-- longest slowdown). The same machine as eg_core::throttle::release and ::slow_down. Both
-- keys share the subscription's hash tag (Redis Cluster). Called only when a lease was
-- taken or the endpoint asked to wait, so a success of an unlimited subscription costs
-- nothing. A busy answer without Retry-After is not passed here: the endpoint's probation
-- is its backoff. Slowdowns only ever lengthen. Returns {'SLOWED', until} or {'OK'}.
--
-- KEYS[1]  the limit hash (fields in delivery_gate.lua)
-- KEYS[2]  the leases
-- ARGV[1]  now, ms
-- ARGV[2]  the attempt's lease id ('' for none)
-- ARGV[3]  Retry-After, ms ('' when the subscription is not to slow down)
-- ARGV[4]  longest slowdown, ms
-- ARGV[5]  key expiry, ms
local now = tonumber(ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
end
if ARGV[3] == '' then
  return {'OK'}
end
local length = math.min(tonumber(ARGV[3]), tonumber(ARGV[4]))
local slowed = tonumber(redis.call('HGET', KEYS[1], 's') or '0')
local untl = string.format('%d', math.max(slowed, now + length))
redis.call('HSET', KEYS[1], 's', untl)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'SLOWED', untl}
