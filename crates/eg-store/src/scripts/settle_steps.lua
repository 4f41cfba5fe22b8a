-- The steps of settling shared by settle.lua (ready streams, senders) and
-- queue_settle.lua (queue streams, pull delivery): sent in front of either script (after
-- stream_steps.lua), so the acknowledgement, dead-letter, archive, history and
-- free-the-body code exists once.
-- It reads the fixed KEYS and ARGV and the per-item layout that settle.lua's header
-- documents (KEYS[1] the stream the holds are on, ARGV[1] its consumer group), and
-- defines held_now(ids) (ends the holds, answers which were held), settle(k, a), which
-- settles the item at KEYS base k and ARGV base a once its hold is known to be ended,
-- and finish(), which the caller runs once at the end: it ends the holds still to end
-- (one XACK for the call), deletes the settled entries (one XDEL), writes the delivered
-- log and keeps history within its bounds. Ready entries in the `codec::EntryLayout::Carried` layout carry
-- the event's body in field b beside the record in d.
--
-- The delivered log (KEYS[6], Partition::delivered_log, codec::shared_step_record): the history step of an event
-- delivered by its only delivery (a carried entry, done) is its whole history, so it
-- is not given a list of its own (RPUSH, PEXPIRE, an index entry and, at the bound, an
-- eviction: five commands) but one field in the partition's newest log bucket, a hash
-- `<log>:<first entry id logged>` of `<topic>/<event id>` -> step. Steps of one call that
-- are the same step (a delivered batch: one attempt, one outcome, for every event of it)
-- are written once, as a record field `#<entry id>` (the first such entry's id) that
-- each event's field names instead of repeating the step; steps of one call for the
-- same event (a fan-out entry's deliveries) share its field, one step per line. One HMGET and one HSET write
-- a call's steps. Buckets rotate every retention/24 or when full, expire a retention
-- after their last write, and at most min(24, most histories) are kept of ~most
-- histories/that many fields each, so the log is bounded like the lists; a record and
-- the fields naming it are in the same bucket, so they go together. A field already
-- taken (an event id published twice) falls back to the event's list.
local group = ARGV[1]
local retention = tonumber(ARGV[2])
local most_histories = tonumber(ARGV[3])
local most_steps = tonumber(ARGV[4])
local most_archived = tonumber(ARGV[5])
local n = tonumber(ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wrote_history = false
-- Entry ids to delete, and delivered-log steps (field, step, list key, entry id), at
-- finish().
local settled_ids = {}
local logged = {}
-- Entry ids whose holds finish() ends, with one XACK for the call (queue_settle.lua's;
-- settle.lua's are ended by held_now).
local to_acknowledge = {}

-- Ends the holds on `ids` with one XACK and answers which of them this call settles,
-- as a set: those it acknowledged. An entry stays in the stream exactly until the
-- settle that acknowledges it deletes it (in the same script), so when XACK counts
-- fewer than it was given, the ids still in the stream are told apart from those
-- another holder settled and deleted first (a reclaimed entry settles for whoever
-- settles it first) by one XRANGE each. An entry left acknowledged but not moved on
-- (a settle that failed half way, on a record Redis refuses) is still in the stream, so
-- its holder settling it again settles it then. An id given twice is in the set once.
local function held_now(ids)
  local held, unique = {}, {}
  for _, id in ipairs(ids) do
    if not held[id] then
      held[id] = true
      unique[#unique + 1] = id
    end
  end
  if call_with_all('XACK', { KEYS[1], group }, unique) < #unique then
    for _, id in ipairs(unique) do
      if not redis.call('XRANGE', KEYS[1], id, id)[1] then
        held[id] = nil
      end
    end
  end
  return held
end

-- Appends a step to an event's history list, which expires a retention after its last
-- write and is named in the history index.
local function append_step(list, step)
  -- RPUSH answers the list's length: trim only a list that grew past its bound.
  if redis.call('RPUSH', list, step) > most_steps then
    redis.call('LTRIM', list, -most_steps, -1)
  end
  redis.call('PEXPIRE', list, retention)
  redis.call('ZADD', KEYS[4], now, list)
  wrote_history = true
end

-- `shared`: the delivery's index (a string) when the entry is a fan-out or batch entry
-- it shares with its siblings (marker `S<index> <of>`, settle.lua), else nil: it
-- carries the body (a batch entry's is field b<index>) and no event hash counts it, and it
-- is deleted by the caller once the last sibling is settled, not here. Otherwise such
-- a delivery is settled as a carried one: its record and KEYS name an event hash of its
-- own (`codec::SettleCall`), so one that lives on takes the body along as the only
-- delivery of that hash, and nothing it writes is shared with its siblings or with an
-- expansion of the entry (expand_fan_out.lua, of this release or an earlier one).
local function settle(k, a, shared)
  local action = ARGV[a + 2]
  -- An entry carrying its event's body is the event's only delivery: no event hash to
  -- count down. A delivery that lives on (retry, requeue, park) or is dead-lettered takes
  -- the body along before the entry goes: for those the entry itself says whether it
  -- carries one, so a caller's mistake can never lose a body. Only a finished delivery
  -- (done, the hot path) trusts the caller's word and reads nothing more.
  local carried = ARGV[a + 8] == '1' or shared ~= nil
  local body = nil
  if action ~= 'done' then
    body = entry_body(KEYS[1], ARGV[a + 1], shared)
    carried = body ~= nil or shared ~= nil
  end
  if not shared then
    settled_ids[#settled_ids + 1] = ARGV[a + 1]
  end

  if ARGV[a + 5] ~= '' and action == 'done' and carried then
    -- The list key is `<history index>:<topic>/<event id>`: the log field is its tail.
    -- The last element names what the log may call a record or bucket after: the entry,
    -- and a shared one's delivery index (its deliveries may be settled in several
    -- calls, and each is settled once).
    local settled_as = ARGV[a + 1]
    if shared then
      settled_as = settled_as .. ':' .. shared
    end
    logged[#logged + 1] = { string.sub(KEYS[k + 2], #KEYS[4] + 2), ARGV[a + 5], KEYS[k + 2], settled_as }
  elseif ARGV[a + 5] ~= '' then
    append_step(KEYS[k + 2], ARGV[a + 5])
  end

  if action == 'retry' and body then
    -- A carried retry: the body waits beside the record, one member `record\nbody`
    -- (records are JSON on one line), and promote.lua hands it back as a `Carried`
    -- entry. No event hash is written, read back or counted down, and its last step
    -- can go to the delivered log.
    -- (Never for queue_settle.lua: a queue entry carries no body, so body is nil.)
    redis.call('ZADD', KEYS[2], ARGV[a + 4], ARGV[a + 3] .. '\n' .. body)
    return 1
  end
  if body and action == 'park' then
    -- Waiting in a sorted set, the record names its event by key: the body moves into
    -- the event hash the record names (`EventHash` layout from here on).
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
      -- Scored by the record's own dead-letter time, so the archive lists records in
      -- the order their deadLetteredAt shows (settle calls may arrive out of order).
      local at = tonumber(ARGV[a + 4])
      if at == 0 then
        at = now
      end
      redis.call('ZADD', KEYS[k + 3], at, id)
      redis.call('ZADD', KEYS[k + 4], at, id)
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
  -- done and deadletter: a terminal outcome, so its key's line (if any) moves on.
  if string.byte(ARGV[a + 8]) == 76 then -- 'L': codec::LINE_MARKER
    advance_line(ARGV[a + 8], KEYS[1], ARGV[a + 7])
  end
  -- done and deadletter: this delivery no longer needs the stored event.
  if not carried and redis.call('HINCRBY', KEYS[k + 1], 'r', -1) <= 0 then
    redis.call('DEL', KEYS[k + 1])
  end
  return 1 + evicted
end


-- Keeps at most `most` members of the sorted-set index `index` (member = key, score =
-- last write), first forgetting those scored before `older_than` (expired by
-- themselves), then removing the lowest-scored keys beyond `most` with `remove` (DEL or
-- UNLINK).
local function keep_newest(index, older_than, most, remove)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', older_than)
  local over = redis.call('ZCARD', index) - most
  if over > 0 then
    local oldest = redis.call('ZPOPMIN', index, over)
    for i = 1, #oldest, 2 do
      redis.call(remove, oldest[i])
    end
  end
end

-- The delivered log's newest bucket, or a new one when there is none, it is older than
-- its span or full.
local function log_bucket(span, per_bucket, first_entry)
  local newest = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
  if newest[1] and now - tonumber(newest[2]) < span and redis.call('HLEN', newest[1]) < per_bucket then
    return newest[1]
  end
  -- Named after the first entry it logs: stream entry ids are unique, so two buckets
  -- started in the same millisecond are still two.
  local bucket = KEYS[6] .. ':' .. first_entry
  redis.call('ZADD', KEYS[6], now, bucket)
  return bucket
end

-- The HSET arguments (field, value, …) that log `logged` into the bucket, taken[i] saying whether
-- step i's field is already there. Steps of one free field (the deliveries of a fan-out
-- entry: one event, several subscriptions) are written as one value, one step per line
-- (a step is JSON, which has no raw newline), up to the bound of a list; a step that
-- several free fields share alone is written once as a record that they name. Steps
-- whose field is taken, or past the bound, go to their lists.
local function log_writes(taken)
  local per_field, fields = {}, {}
  for i, step in ipairs(logged) do
    local f = per_field[step[1]]
    if taken[i] or (f and #f.steps >= most_steps) then
      append_step(step[3], step[2])
    else
      if not f then
        f = { first = i, steps = {} }
        per_field[step[1]] = f
        fields[#fields + 1] = step[1]
      end
      f.steps[#f.steps + 1] = step[2]
    end
  end
  local sharing = {}
  for _, field in ipairs(fields) do
    local steps = per_field[field].steps
    if #steps == 1 then
      sharing[steps[1]] = (sharing[steps[1]] or 0) + 1
    end
  end
  local writes, records = {}, {}
  for _, field in ipairs(fields) do
    local f = per_field[field]
    local value = table.concat(f.steps, '\n')
    if #f.steps == 1 and sharing[value] > 1 then
      if not records[value] then
        records[value] = '#' .. logged[f.first][4]
        writes[#writes + 1] = records[value]
        writes[#writes + 1] = value
      end
      value = records[value]
    end
    writes[#writes + 1] = field
    writes[#writes + 1] = value
  end
  return writes
end

local function write_delivered_log()
  local buckets = math.max(1, math.min(24, most_histories))
  local span = math.max(1, math.ceil(retention / 24))
  local bucket = log_bucket(span, math.ceil(most_histories / buckets), logged[1][4])
  if #logged == 1 then
    -- The unbatched hot path: one command.
    if redis.call('HSETNX', bucket, logged[1][1], logged[1][2]) == 0 then
      append_step(logged[1][3], logged[1][2])
    end
  else
    local fields = {}
    for i, step in ipairs(logged) do
      fields[i] = step[1]
    end
    local _, taken = call_with_all('HMGET', { bucket }, fields)
    call_with_all('HSET', { bucket }, log_writes(taken))
  end
  redis.call('PEXPIRE', bucket, retention)
  -- Keep the newest `buckets`, dropping whole buckets, oldest first.
  keep_newest(KEYS[6], now - retention - span, buckets, 'UNLINK')
end

local function finish()
  if #to_acknowledge > 0 then
    call_with_all('XACK', { KEYS[1], group }, to_acknowledge)
  end
  if #settled_ids > 0 then
    call_with_all('XDEL', { KEYS[1] }, settled_ids)
  end
  if #logged > 0 then
    write_delivered_log()
  end
  if wrote_history then
    -- Keep the partition's lists within their bound, least recently written first.
    keep_newest(KEYS[4], now - retention, most_histories, 'DEL')
  end
end
