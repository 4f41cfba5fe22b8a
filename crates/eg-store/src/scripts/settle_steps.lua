-- The steps of settling shared by settle.lua (ready streams, senders) and
-- queue_settle.lua (queue streams, pull delivery): sent in front of either script, so
-- the dead-letter, archive, history and free-the-body code exists once.
-- It reads the fixed KEYS and ARGV and the per-item layout that settle.lua's header
-- documents (KEYS[1] the stream the holds are on, ARGV[1] its consumer group), and
-- defines settle(k, a), which settles item at KEYS base k and ARGV base a, and
-- bound_history(), which the caller runs once at the end. Ready entries of layout 2
-- (codec::EntryLayout) carry the event's body in field b beside the record in d.
local group = ARGV[1]
local retention = tonumber(ARGV[2])
local most_histories = tonumber(ARGV[3])
local most_steps = tonumber(ARGV[4])
local most_archived = tonumber(ARGV[5])
local n = tonumber(ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wrote_history = false

-- The body an entry carries (layout 2), read before the entry is deleted; nil if the
-- entry is gone or carries none.
local function carried_body(id)
  local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
  if entry then
    local fields = entry[2]
    for j = 1, #fields, 2 do
      if fields[j] == 'b' then
        return fields[j + 1]
      end
    end
  end
  return nil
end

local function settle(k, a)
  if redis.call('XACK', KEYS[1], group, ARGV[a + 1]) == 0 then
    return 0
  end
  local action = ARGV[a + 2]
  -- An entry carrying its event's body is the event's only delivery: no event hash to
  -- count down. A delivery that lives on (retry, requeue, park) or is dead-lettered takes
  -- the body along before the entry goes: for those the entry itself says whether it
  -- carries one, so a caller's mistake can never lose a body. Only a finished delivery
  -- (done, the hot path) trusts the caller's word and reads nothing more.
  local carried = ARGV[a + 8] == '1'
  local body = nil
  if action ~= 'done' then
    body = carried_body(ARGV[a + 1])
    carried = body ~= nil
  end
  redis.call('XDEL', KEYS[1], ARGV[a + 1])

  if ARGV[a + 5] ~= '' then
    -- RPUSH answers the list's length: trim only a list that grew past its bound.
    if redis.call('RPUSH', KEYS[k + 2], ARGV[a + 5]) > most_steps then
      redis.call('LTRIM', KEYS[k + 2], -most_steps, -1)
    end
    redis.call('PEXPIRE', KEYS[k + 2], retention)
    redis.call('ZADD', KEYS[4], now, KEYS[k + 2])
    wrote_history = true
  end

  if body and (action == 'retry' or action == 'park') then
    -- Waiting in a sorted set, the record names its event by key: the body moves into
    -- the event hash the record names (layout 1 from here on).
    redis.call('HSET', KEYS[k + 1], 'b', body, 'r', 1)
  end
  if action == 'retry' then
    redis.call('ZADD', KEYS[2], ARGV[a + 4], ARGV[a + 3])
    return 1
  elseif action == 'requeue' then
    if body then
      redis.call('XADD', KEYS[1], '*', 'v', '2', 'd', ARGV[a + 3], 'b', body)
    else
      redis.call('XADD', KEYS[1], '*', 'd', ARGV[a + 3])
    end
    return 1
  elseif action == 'park' then
    redis.call('ZADD', KEYS[k + 6], ARGV[a + 4], ARGV[a + 3])
    redis.call('SADD', KEYS[5], ARGV[a + 7])
    return 1
  end

  local evicted = 0
  if action == 'deadletter' then
    body = body or redis.call('HGET', KEYS[k + 1], 'b') or 'null'
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
  if not carried and redis.call('HINCRBY', KEYS[k + 1], 'r', -1) <= 0 then
    redis.call('DEL', KEYS[k + 1])
  end
  return 1 + evicted
end


local function bound_history()
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
end
