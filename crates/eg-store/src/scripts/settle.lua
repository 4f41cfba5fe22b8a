-- Ends one attempt's hold on a ready-stream entry and moves the delivery on, atomically:
-- acknowledge and delete the entry, then retry, requeue, dead-letter or finish it.
-- If the entry is no longer pending (the scheduler reclaimed it, or another holder
-- settled it first), nothing is changed and 0 is returned: the delivery belongs to
-- whoever holds it now, so it is never moved twice.
--
-- KEYS[1]  ready stream        KEYS[2]  retry sorted set (score = due, ms)
-- KEYS[3]  dead-letter delay sorted set (score = dead-letter time, ms)
-- KEYS[4]  the event hash (fields: b = body, r = deliveries outstanding)
-- ARGV[1]  consumer group      ARGV[2]  entry id
-- ARGV[3]  action: done | retry | requeue | deadletter
-- ARGV[4]  retry/requeue: the delivery record; deadletter: the dead-letter entry
-- ARGV[5]  retry: due time, ms
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
local action = ARGV[3]
if action == 'retry' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
  return 1
elseif action == 'requeue' then
  redis.call('XADD', KEYS[1], '*', 'd', ARGV[4])
  return 1
elseif action == 'deadletter' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local body = redis.call('HGET', KEYS[4], 'b') or 'null'
  -- The record carries its own copy of the event, so the event hash can go now.
  redis.call('ZADD', KEYS[3], now, ARGV[4] .. '\n' .. body)
end
-- done and deadletter: this delivery no longer needs the stored event.
if redis.call('HINCRBY', KEYS[4], 'r', -1) <= 0 then
  redis.call('DEL', KEYS[4])
end
return 1
