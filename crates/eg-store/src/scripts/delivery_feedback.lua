-- After an attempt of a throttled subscription: ends its lease and, on a busy answer
-- (429/503), slows the whole subscription. The same machine as eg_core::throttle::release
-- and ::after_busy. Both keys share the subscription's hash tag (Redis Cluster). Called
-- only when a lease was taken or the answer was busy, so a success of an unlimited
-- subscription costs nothing.
--   with Retry-After    -> slowed until now + min(asked, max); the streak is untouched
--   without             -> streak + 1 if the last busy answer came within twice its
--                          backoff, else 1; slowed until now + min(base·2^(streak-1), max)
--   slowdowns only ever lengthen. Returns {'SLOWED', until} or {'OK'}.
--
-- KEYS[1]  the limit hash (fields in delivery_gate.lua)
-- KEYS[2]  the leases
-- ARGV[1]  now, ms
-- ARGV[2]  the attempt's lease id ('' for none)
-- ARGV[3]  'done' or 'busy'
-- ARGV[4]  Retry-After, ms ('' when the answer gave none)
-- ARGV[5]  longest slowdown, ms
-- ARGV[6]  first backoff, ms
-- ARGV[7]  key expiry, ms
local now = tonumber(ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
end
if ARGV[3] ~= 'busy' then
  return {'OK'}
end
local longest = tonumber(ARGV[5])
local base = tonumber(ARGV[6])
local function backoff(streak)
  local doublings = math.min(math.max(streak - 1, 0), 30)
  return math.min(base * 2 ^ doublings, longest)
end
local h = redis.call('HMGET', KEYS[1], 's', 'k', 'b')
local slowed = tonumber(h[1] or '0')
local length
if ARGV[4] ~= '' then
  length = math.min(tonumber(ARGV[4]), longest)
else
  local streak = tonumber(h[2] or '0')
  local busy_at = tonumber(h[3] or '0')
  if busy_at > 0 and now - busy_at <= 2 * backoff(streak) then
    streak = streak + 1
  else
    streak = 1
  end
  length = backoff(streak)
  redis.call('HSET', KEYS[1], 'k', streak, 'b', string.format('%d', now))
end
local untl = string.format('%d', math.max(slowed, now + length))
redis.call('HSET', KEYS[1], 's', untl)
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return {'SLOWED', untl}
