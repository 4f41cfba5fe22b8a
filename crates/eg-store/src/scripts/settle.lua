-- Ends the holds of N attempts on ready-stream entries of one partition and moves each
-- delivery on, atomically: acknowledge and delete the entry, then retry, requeue,
-- dead-letter, park or finish it, and append the step to the event's delivery history.
-- One call settles a whole batch (or whatever a sender's settle queue gathered): the
-- fixed work (TIME, the history index's bound) is done once, and the round trip and
-- script start are paid once instead of N times.
-- If an entry is no longer pending (the scheduler reclaimed it, or another holder
-- settled it first), nothing is changed for it and its result is 0: the delivery belongs
-- to whoever holds it now, so it is never moved twice (nor its history written twice).
-- Otherwise its result is 1 + the number of old records evicted from the dead-letter
-- archive. Returns the N results in order.
--
-- The positions below are built by `codec::SettleCall` (codec.rs), whose test checks the
-- per-item strides against this header and the loop at the end.
--
-- KEYS[1]  ready stream        KEYS[2]  retry sorted set (score = due, ms)
-- KEYS[3]  dead-letter delay sorted set (score = dead-letter time, ms)
-- KEYS[4]  history index (list key -> last write, ms)    KEYS[5]  paused index
-- then per item i (base b = 5 + 6 * (i - 1)):
-- KEYS[b+1] the event hash (fields: b = body, r = deliveries outstanding)
-- KEYS[b+2] the event's history list
-- KEYS[b+3] archive: every record id   KEYS[b+4] archive: ids not redriven yet
-- KEYS[b+5] archive: record id -> entry \n body
-- KEYS[b+6] the subscription's paused set (score = TTL deadline)
-- ARGV[1]  consumer group      ARGV[2]  history retention, ms
-- ARGV[3]  most history lists per partition     ARGV[4]  most entries per list
-- ARGV[5]  most archived records per subscription and partition
-- ARGV[6]  N
-- then per item i (base a = 6 + 7 * (i - 1)):
-- ARGV[a+1] entry id
-- ARGV[a+2] action: done | retry | requeue | deadletter | park
-- ARGV[a+3] retry/requeue/park: the delivery record; deadletter: the dead-letter entry
-- ARGV[a+4] retry: due time, ms; park: TTL deadline, ms
-- ARGV[a+5] history entry ('' = keep none)
-- ARGV[a+6] deadletter: archive record id ('' = do not archive)
-- ARGV[a+7] park: the subscription (`<topic>/<subscription>`, the paused index member)
--
-- History lists evicted for room (ZPOPMIN of the index) are deleted by the names the
-- index holds: keys of this partition's hash tag, so the same slot on a cluster.
local group = ARGV[1]
local retention = tonumber(ARGV[2])
local most_histories = tonumber(ARGV[3])
local most_steps = tonumber(ARGV[4])
local most_archived = tonumber(ARGV[5])
local n = tonumber(ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wrote_history = false

local function settle(k, a)
  if redis.call('XACK', KEYS[1], group, ARGV[a + 1]) == 0 then
    return 0
  end
  redis.call('XDEL', KEYS[1], ARGV[a + 1])

  if ARGV[a + 5] ~= '' then
    redis.call('RPUSH', KEYS[k + 2], ARGV[a + 5])
    redis.call('LTRIM', KEYS[k + 2], -most_steps, -1)
    redis.call('PEXPIRE', KEYS[k + 2], retention)
    redis.call('ZADD', KEYS[4], now, KEYS[k + 2])
    wrote_history = true
  end

  local action = ARGV[a + 2]
  if action == 'retry' then
    redis.call('ZADD', KEYS[2], ARGV[a + 4], ARGV[a + 3])
    return 1
  elseif action == 'requeue' then
    redis.call('XADD', KEYS[1], '*', 'd', ARGV[a + 3])
    return 1
  elseif action == 'park' then
    redis.call('ZADD', KEYS[k + 6], ARGV[a + 4], ARGV[a + 3])
    redis.call('SADD', KEYS[5], ARGV[a + 7])
    return 1
  end

  local evicted = 0
  if action == 'deadletter' then
    local body = redis.call('HGET', KEYS[k + 1], 'b') or 'null'
    -- The record carries its own copy of the event, so the event hash can go now.
    local record = ARGV[a + 3] .. '\n' .. body
    redis.call('ZADD', KEYS[3], now, record)
    local id = ARGV[a + 6]
    if id ~= '' then
      redis.call('HSET', KEYS[k + 5], id, record)
      redis.call('ZADD', KEYS[k + 3], now, id)
      redis.call('ZADD', KEYS[k + 4], now, id)
      local over = redis.call('ZCARD', KEYS[k + 3]) - most_archived
      if over > 0 then
        local oldest = redis.call('ZPOPMIN', KEYS[k + 3], over)
        for i = 1, #oldest, 2 do
          redis.call('HDEL', KEYS[k + 5], oldest[i], oldest[i] .. ':r')
          redis.call('ZREM', KEYS[k + 4], oldest[i])
        end
        evicted = over
      end
    end
  end
  -- done and deadletter: this delivery no longer needs the stored event.
  if redis.call('HINCRBY', KEYS[k + 1], 'r', -1) <= 0 then
    redis.call('DEL', KEYS[k + 1])
  end
  return 1 + evicted
end

local results = {}
for i = 1, n do
  results[i] = settle(5 + 6 * (i - 1), 6 + 7 * (i - 1))
end

if wrote_history then
  -- Lists older than the retention expired by themselves; forget their names. Then keep
  -- the partition within its bound, least recently written first.
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - retention)
  local over = redis.call('ZCARD', KEYS[4]) - most_histories
  if over > 0 then
    local oldest = redis.call('ZPOPMIN', KEYS[4], over)
    for i = 1, #oldest, 2 do
      redis.call('DEL', oldest[i])
    end
  end
end
return results
