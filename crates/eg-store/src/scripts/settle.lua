-- Ends one attempt's hold on a ready-stream entry and moves the delivery on, atomically:
-- acknowledge and delete the entry, then retry, requeue, dead-letter, park or finish it,
-- and append the step to the event's delivery history.
-- If the entry is no longer pending (the scheduler reclaimed it, or another holder
-- settled it first), nothing is changed and 0 is returned: the delivery belongs to
-- whoever holds it now, so it is never moved twice (nor its history written twice).
-- Otherwise returns 1 + the number of old records evicted from the dead-letter archive.
--
-- KEYS[1]  ready stream        KEYS[2]  retry sorted set (score = due, ms)
-- KEYS[3]  dead-letter delay sorted set (score = dead-letter time, ms)
-- KEYS[4]  the event hash (fields: b = body, r = deliveries outstanding)
-- KEYS[5]  the event's history list     KEYS[6]  history index (list key -> last write, ms)
-- KEYS[7]  archive: every record id     KEYS[8]  archive: ids not redriven yet
-- KEYS[9]  archive: record id -> entry \n body
-- KEYS[10] the subscription's paused set (score = TTL deadline)   KEYS[11] paused index
-- ARGV[1]  consumer group      ARGV[2]  entry id
-- ARGV[3]  action: done | retry | requeue | deadletter | park
-- ARGV[4]  retry/requeue/park: the delivery record; deadletter: the dead-letter entry
-- ARGV[5]  retry: due time, ms; park: TTL deadline, ms
-- ARGV[6]  history entry ('' = keep none)   ARGV[7] history retention, ms
-- ARGV[8]  most history lists per partition ARGV[9] most entries per list
-- ARGV[10] deadletter: archive record id ('' = do not archive)
-- ARGV[11] most archived records per subscription and partition
-- ARGV[12] park: the subscription (`<topic>/<subscription>`, the paused index member)
--
-- History lists evicted for room (ZPOPMIN of the index) are deleted by the names the
-- index holds: keys of this partition's hash tag, so the same slot on a cluster.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if ARGV[6] ~= '' then
  local retention = tonumber(ARGV[7])
  redis.call('RPUSH', KEYS[5], ARGV[6])
  redis.call('LTRIM', KEYS[5], -tonumber(ARGV[9]), -1)
  redis.call('PEXPIRE', KEYS[5], retention)
  redis.call('ZADD', KEYS[6], now, KEYS[5])
  -- Lists older than the retention expired by themselves; forget their names.
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - retention)
  local over = redis.call('ZCARD', KEYS[6]) - tonumber(ARGV[8])
  if over > 0 then
    local oldest = redis.call('ZPOPMIN', KEYS[6], over)
    for i = 1, #oldest, 2 do
      redis.call('DEL', oldest[i])
    end
  end
end

local action = ARGV[3]
if action == 'retry' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
  return 1
elseif action == 'requeue' then
  redis.call('XADD', KEYS[1], '*', 'd', ARGV[4])
  return 1
elseif action == 'park' then
  redis.call('ZADD', KEYS[10], ARGV[5], ARGV[4])
  redis.call('SADD', KEYS[11], ARGV[12])
  return 1
end

local evicted = 0
if action == 'deadletter' then
  local body = redis.call('HGET', KEYS[4], 'b') or 'null'
  -- The record carries its own copy of the event, so the event hash can go now.
  local record = ARGV[4] .. '\n' .. body
  redis.call('ZADD', KEYS[3], now, record)
  if ARGV[10] ~= '' then
    redis.call('HSET', KEYS[9], ARGV[10], record)
    redis.call('ZADD', KEYS[7], now, ARGV[10])
    redis.call('ZADD', KEYS[8], now, ARGV[10])
    local over = redis.call('ZCARD', KEYS[7]) - tonumber(ARGV[11])
    if over > 0 then
      local oldest = redis.call('ZPOPMIN', KEYS[7], over)
      for i = 1, #oldest, 2 do
        redis.call('HDEL', KEYS[9], oldest[i], oldest[i] .. ':r')
        redis.call('ZREM', KEYS[8], oldest[i])
      end
      evicted = over
    end
  end
end
-- done and deadletter: this delivery no longer needs the stored event.
if redis.call('HINCRBY', KEYS[4], 'r', -1) <= 0 then
  redis.call('DEL', KEYS[4])
end
return 1 + evicted
