-- Ends the holds of N attempts on ready-stream entries of one partition and moves each
-- delivery on, atomically: acknowledge and delete the entry, then retry, requeue,
-- dead-letter, park or finish it, and append the step to the event's delivery history.
-- One call settles a whole batch (or whatever a sender's settle queue gathered): the
-- fixed work (TIME, one XACK and one XDEL of every settled entry, the delivered log,
-- the history index's bound) is done once, and the round trip and script start are
-- paid once instead of N times.
-- If an entry was settled already (by another holder, say after the scheduler
-- reclaimed it; held_now in settle_steps.lua), nothing is changed for it and its result
-- is 0: the delivery belongs to whoever settled it, so it is never moved twice (nor its
-- history written twice); an entry named twice in one call is settled once.
-- Otherwise its result is 1 + the number of old records evicted from the dead-letter
-- archive. Returns the N results in order.
--
-- The positions below are built by `codec::SettleCall` (codec.rs), whose test checks the
-- per-item strides against this header and the loop at the end.
--
-- KEYS[1]  ready stream        KEYS[2]  retry sorted set (score = due, ms)
-- KEYS[3]  dead-letter delay sorted set (score = dead-letter time, ms)
-- KEYS[4]  history index (list key -> last write, ms)    KEYS[5]  paused index
-- KEYS[6]  delivered log (bucket key -> created, ms; see settle_steps.lua)
-- then per item i (base b = 6 + 6 * (i - 1)):
-- KEYS[b+1] the event hash (fields: b = body, r = deliveries outstanding)
-- KEYS[b+2] the event's history list
-- KEYS[b+3] archive: every record id   KEYS[b+4] archive: ids not redriven yet
-- KEYS[b+5] archive: record id -> entry \n body
-- KEYS[b+6] the subscription's paused set (score = TTL deadline)
-- ARGV[1]  consumer group      ARGV[2]  history retention, ms
-- ARGV[3]  most history lists per partition     ARGV[4]  most entries per list
-- ARGV[5]  most archived records per subscription and partition
-- ARGV[6]  N
-- then per item i (base a = 6 + 8 * (i - 1)):
-- ARGV[a+1] entry id
-- ARGV[a+2] action: done | retry | requeue | deadletter | park
-- ARGV[a+3] retry/requeue/park: the delivery record; deadletter: the dead-letter entry
-- ARGV[a+4] retry: due time, ms; park: TTL deadline, ms; deadletter: the record's
--           dead-letter time, ms (its archive score)
-- ARGV[a+5] history entry ('' = keep none)
-- ARGV[a+6] deadletter: archive record id ('' = do not archive)
-- ARGV[a+7] park: the subscription (`<topic>/<subscription>`, the paused index member)
-- ARGV[a+8] '1' when the entry carries the event's body (`codec::EntryLayout::Carried`):
--           no event hash exists; a delivery that lives on takes the body along;
--           or, for a delivery of an ordered subscription (never carried), its line
--           marker `L…` (codec::line_marker): done and deadletter advance its line
--           (line_steps.lua); retry, requeue and park keep it at the head;
--           or, for a delivery of a fan-out or batch entry (`FanOut` and `Batch`
--           layouts, which carry the body: a batch entry's delivery i in field b<i>),
--           `S<index> <of>`: its index among the entry's `of` deliveries;
--           or `S* <of>`: the item stands for every delivery of such an entry, all done
--           with one history step (ARGV[a+5]), and ARGV[a+3] lists their delivered-log
--           fields (`<topic>/<event id>`) in index order, one per line: a delivered batch
--           is one item (codec::SettleCall joins them)
--
-- A fan-out or batch entry is held by all its deliveries at once (one per subscription
-- or per event, read together) and is acknowledged and deleted with the last of them. When one call
-- settles every one of them (the usual case: a sender settles them together) nothing
-- more is written. Otherwise each settled index is remembered in the set
-- `<ready stream>:shared:<entry id>` until the last: the entry stays pending meanwhile,
-- so a holder that dies leaves it to be taken back (expand_fan_out.lua then expands
-- only the indexes not settled), and an index settled twice (by two holders, after a
-- take-back) is settled once, its second result 0.

--
-- The steps themselves are in settle_steps.lua, sent in front of this file (after
-- stream_steps.lua and line_steps.lua).
--
-- History lists and log buckets evicted for room (ZPOPMIN of their index) are deleted by
-- the names the index holds, and a new log bucket is named after the log's key: keys of
-- this partition's hash tag, so the same slot on a cluster.
-- Items on their own entries (ids, positions), and items sharing fan-out entries
-- (entry id -> { of = deliveries in the entry, items = { {position, index}, … } }).
-- Items standing for whole entries ({position, of}).
local ids, own, shared, shared_ids, wholes = {}, {}, {}, {}, {}
for i = 1, n do
  local a = 6 + 8 * (i - 1)
  local index, of, whole_of
  if string.byte(ARGV[a + 8]) == 83 then -- 'S': only a shared entry's marker is matched
    index, of = string.match(ARGV[a + 8], '^S(%d+) (%d+)$')
    if not index then
      whole_of = string.match(ARGV[a + 8], '^S%* (%d+)$')
    end
  end
  if whole_of then
    wholes[#wholes + 1] = { i, tonumber(whole_of) }
  elseif index then
    local id = ARGV[a + 1]
    if not shared[id] then
      shared[id] = { of = tonumber(of), items = {} }
      shared_ids[#shared_ids + 1] = id
    end
    local items = shared[id].items
    items[#items + 1] = { i, index }
  else
    ids[#ids + 1] = ARGV[a + 1]
    own[#own + 1] = i
  end
end
local results = {}
local held = held_now(ids)
for _, i in ipairs(own) do
  local id = ARGV[6 + 8 * (i - 1) + 1]
  if held[id] then
    held[id] = nil
    results[i] = settle(6 + 6 * (i - 1), 6 + 8 * (i - 1), nil)
  else
    results[i] = 0
  end
end

-- Whether shared entry `id` is still held: pending in the group (asked first: it does
-- not copy a batch's bodies), or else still in the stream, acknowledged by a call that
-- failed before it deleted the entry (its holder settling again must finish it, as
-- held_now does for entries of their own). A missing group is not held.
local function shared_held(id)
  local pending = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
  if type(pending) == 'table' and pending[1] then
    return true
  end
  return redis.call('XRANGE', KEYS[1], id, id)[1] ~= nil
end

-- Settles the items holding fan-out entry `id` (see the header).
local function settle_shared(id, entry)
  for _, item in ipairs(entry.items) do
    results[item[1]] = 0
  end
  -- It is acknowledged only with its last delivery, or when taken back and expanded,
  -- and deleted at once then.
  if not shared_held(id) then
    return
  end
  local marks = KEYS[1] .. ':shared:' .. id
  local named, count = {}, 0
  for _, item in ipairs(entry.items) do
    if not named[item[2]] then
      named[item[2]] = true
      count = count + 1
    end
  end
  local whole = count >= entry.of and redis.call('EXISTS', marks) == 0
  local done = {}
  for _, item in ipairs(entry.items) do
    local i, index = item[1], item[2]
    if not done[index] and (whole or redis.call('SADD', marks, index) == 1) then
      done[index] = true
      results[i] = settle(6 + 6 * (i - 1), 6 + 8 * (i - 1), index)
    end
  end
  if whole or redis.call('SCARD', marks) >= entry.of then
    redis.call('XACK', KEYS[1], group, id)
    settled_ids[#settled_ids + 1] = id
    redis.call('DEL', marks)
  else
    -- Outlives any hold: a take-back expands the entry and deletes the set sooner.
    redis.call('PEXPIRE', marks, 86400000)
  end
end
for _, id in ipairs(shared_ids) do
  settle_shared(id, shared[id])
end

-- Settles item `i`, every delivery of the shared entry it names, done (marker `S* <of>`):
-- each event's step goes to the delivered log (its list named from the history index and
-- its field, as settle() names it) and the entry goes. Should another holder have
-- settled some of them meanwhile (its marks exist), only the others are.
local function settle_whole(i, of)
  local a = 6 + 8 * (i - 1)
  local id = ARGV[a + 1]
  results[i] = 0
  if not shared_held(id) then
    return
  end
  local marks = KEYS[1] .. ':shared:' .. id
  local marked = redis.call('EXISTS', marks) == 1
  local step = ARGV[a + 5]
  local index = 0
  for field in string.gmatch(ARGV[a + 3], '[^\n]+') do
    if not marked or redis.call('SADD', marks, index) == 1 then
      results[i] = 1
      if step ~= '' then
        logged[#logged + 1] = { field, step, KEYS[4] .. ':' .. field, id .. ':' .. index }
      end
    end
    index = index + 1
  end
  if not marked or redis.call('SCARD', marks) >= of then
    redis.call('XACK', KEYS[1], group, id)
    settled_ids[#settled_ids + 1] = id
    redis.call('DEL', marks)
  end
end
for _, whole in ipairs(wholes) do
  settle_whole(whole[1], whole[2])
end
finish()
return results
