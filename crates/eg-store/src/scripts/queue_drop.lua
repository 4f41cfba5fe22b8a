-- Removes queued events of a deleted queue-mode subscription in one partition, and the
-- queue itself once empty: each removed entry (queue stream entry, locked or not, or
-- delayed-set member) gives up its hold on its event, which is freed after its last
-- delivery. Only what this call actually removed counts down, so schedulers running it
-- at once never count an event twice.
--
-- KEYS[1]  the queue stream   KEYS[2]  its delayed set   KEYS[3]  the queues index
-- KEYS[4]  its expired-lock scan cursor
-- KEYS[4+i]  item i's event hash
-- ARGV[1]  the subscription (`<topic>/<subscription>`, the index member)
-- ARGV[2]  N, then per item i: ARGV[2+2i-1] kind (s = stream entry id, z = delayed
--          member), ARGV[2+2i] the id or member
-- Returns the number of items removed.
local n = tonumber(ARGV[2])
local removed = 0
for i = 1, n do
  local kind, item = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local gone
  if kind == 's' then
    gone = redis.call('XDEL', KEYS[1], item)
  else
    gone = redis.call('ZREM', KEYS[2], item)
  end
  if gone == 1 then
    removed = removed + 1
    if redis.call('HINCRBY', KEYS[4 + i], 'r', -1) <= 0 then
      redis.call('DEL', KEYS[4 + i])
    end
  end
end
if redis.call('XLEN', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
  redis.call('SREM', KEYS[3], ARGV[1])
end
return removed
