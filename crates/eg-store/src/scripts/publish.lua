-- Stores the events of one publish request and enqueues their deliveries, all or nothing:
-- push deliveries into the ready stream (for the senders), queue-mode deliveries into
-- their subscription's queue stream (for pull receivers; a sender never sees them).
-- All keys share the partition's hash tag.
--
-- KEYS[1]  catalog version seen by this partition (string)
-- KEYS[2]  ready stream of the partition
-- KEYS[3..2+N]  one event hash per event (fields: b = body, r = deliveries outstanding);
--               not written for an event whose only delivery is a push one: its ready
--               entry carries the body (`Carried` layout: v = 2, d = record, b = body)
-- KEYS[3+N]  the partition's queues index (set)   KEYS[4+N]  the queue signal stream
-- KEYS[5+N..4+N+Q]  one queue stream per queue-mode subscription written to
-- KEYS[5+N+Q..4+N+Q+L]  one ordering line per key of an ordered subscription written to
--               (list of codec::line_member), then, when L > 0, the partition's
--               waiting hash (`<topic>/<subscription>` -> deliveries behind a head)
--               and its line index (hash, line key -> head id the sweep last saw)
-- KEYS[#KEYS - A]  when W > 0 (ARGV[4]): the topic's seen set (sorted set, duplicate
--               identity -> accepted at in ms; codec::DuplicateCheck)
-- KEYS[#KEYS]  when B > 0 (ARGV[6]), last: the partition's archive stream (archive.md;
--               entries t = topic, b = body; codec::ArchiveAppend). A is 1 then, else 0.
-- ARGV[1]  catalog version the caller matched against
-- ARGV[2]  N, the number of events     ARGV[3]  Q, the number of queue streams
-- ARGV[4]  W, the topic's duplicate detection window in ms (0: no check)
-- ARGV[5]  now, the caller's clock in ms (the seen set's scores)
-- ARGV[6]  B, the archive bound (entries per partition; 0: the topic is not archived)
-- ARGV[7]  at the bound: "refuse" or "drop-oldest"    ARGV[8]  the topic (archive entries' t)
-- then, per event in KEYS order: when W > 0 its identity; its body, M (its number of
-- deliveries), and M pairs of (target, delivery record): target 0 = the ready stream,
-- q = the q-th queue stream, Q + l = the l-th line (its record is then a line member:
-- delivery id, newline, record); or body, 0 and one fan-out record: several push deliveries in one ready entry
-- (`FanOut` layout: v = 3, d = fan-out record, b = body; the first reader expands it, see
-- expand_fan_out.lua), and no event hash written yet
-- or body and M = -1: no delivery, the event is only archived (no event hash, nothing queued)
-- or body, M = -2, a batch number g and one carried record: the event's only delivery,
-- a push one to a subscription that batches, joins batch entry g of this call (`Batch`
-- layout: v = 4, then d<i> = record and b<i> = body of its i-th event, from 0, in event
-- order; codec::Routes), written after every event; a batch left with one event is
-- written as a `Carried` entry instead. No event hash is written.
-- then Q subscription names (`<topic>/<subscription>`), in queue stream order
-- then L subscription names, in line order
--
-- A delivery pushed onto an empty line is its head: its record also goes to the ready
-- stream, and a line so started joins the line index (sweep_lines.lua looks there for
-- stuck lines). One pushed behind others waits (counted in the waiting hash) until
-- settles move the line on (line_steps.lua). Array order within a request is RPUSH order.
--
-- With W > 0, an event whose identity the seen set holds from within the window is
-- skipped (nothing of it written); every other event's identity is added with score now,
-- so a repeat later in the same call is skipped too. Members older than the window are
-- removed, and the set expires a window after the topic's last publish.
--
-- With B > 0, every event not skipped is appended to the archive stream. At "refuse", a
-- call that would take the stream past B entries (counting all N events) writes nothing
-- and returns {"ARCHIVE_FULL", length}; at "drop-oldest" the stream is trimmed to B after
-- the appends, and the number trimmed is returned.
--
-- Returns {"OK", skipped, dropped} (skipped: the numbers i, as in KEYS[2+i], of the events
-- skipped as duplicates, space-separated; empty without a check; dropped: archive entries
-- trimmed, "0" unless drop-oldest) or {"STALE", version} when the
-- catalog changed after the caller's snapshot (or vanished); nothing is written then, and
-- the caller re-matches with a fresh catalog.
local raw = redis.call('GET', KEYS[1])
local cached = tonumber(ARGV[1])
-- Every catalog write sets this key before the API call returns, so its absence under a
-- non-empty cached catalog means Redis lost its data: the catalog must be read again.
if raw == false and cached > 0 then
  return {'STALE', '0'}
end
local seen = tonumber(raw or '0')
if seen > cached then
  return {'STALE', raw}
end
local n = tonumber(ARGV[2])
local q = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local bound = tonumber(ARGV[6])
-- The last key of the layout without the seen set and the archive: the tail keys are
-- found from it.
local tail = #KEYS
local archive = false
if bound > 0 then
  archive = KEYS[tail]
  tail = tail - 1
  -- Checked before anything is written: a refused publish stores nothing.
  local backlog = redis.call('XLEN', archive)
  if ARGV[7] == 'refuse' and backlog + n > bound then
    return {'ARCHIVE_FULL', tostring(backlog)}
  end
end
local seen_set = false
if window > 0 then
  seen_set = KEYS[tail]
  tail = tail - 1
  redis.call('ZREMRANGEBYSCORE', seen_set, '-inf', now - window)
end
-- A queue stream is created with its group (from id 0: nothing before it is skipped);
-- it is recreated the same way if it vanished (Redis lost data).
for i = 1, q do
  local stream = KEYS[4 + n + i]
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, 'receivers', '0', 'MKSTREAM')
  end
end
-- Line number -> deliveries this call put behind a head.
local behind = {}
local skipped = {}
-- Batch number -> record, body, record, body, … of its events; the numbers in order met.
local batches, batch_order = {}, {}
local at = 9
for i = 1, n do
  local duplicate = false
  if seen_set then
    local identity = ARGV[at]
    at = at + 1
    if redis.call('ZSCORE', seen_set, identity) then
      duplicate = true
    else
      redis.call('ZADD', seen_set, now, identity)
    end
  end
  local body = ARGV[at]
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  if archive and not duplicate then
    redis.call('XADD', archive, '*', 't', ARGV[8], 'b', body)
  end
  if m == -1 then
    -- Archived only: nothing follows, nothing is queued.
    m = 0
    if duplicate then
      skipped[#skipped + 1] = tostring(i)
    end
  elseif duplicate then
    -- Past its fan-out record, its batch number and record, or its M (target, record) pairs.
    if m == 0 then
      at = at + 1
    elseif m == -2 then
      at = at + 2
    else
      at = at + 2 * m
    end
    m = 0
    skipped[#skipped + 1] = tostring(i)
  elseif m == 0 then
    redis.call('XADD', KEYS[2], '*', 'v', '3', 'd', ARGV[at], 'b', body)
    at = at + 1
  elseif m == -2 then
    local g = ARGV[at]
    local batch = batches[g]
    if not batch then
      batch = {}
      batches[g] = batch
      batch_order[#batch_order + 1] = g
    end
    batch[#batch + 1] = ARGV[at + 1]
    batch[#batch + 1] = body
    at = at + 2
    m = 0
  elseif m == 1 and tonumber(ARGV[at]) == 0 then
    -- One push delivery: the body travels in its entry, and no event hash is written,
    -- read or freed (codec::EntryLayout::Carried).
    redis.call('XADD', KEYS[2], '*', 'v', '2', 'd', ARGV[at + 1], 'b', body)
    at = at + 2
    m = 0
  else
    redis.call('HSET', KEYS[2 + i], 'b', body, 'r', m)
  end
  for _ = 1, m do
    local target = tonumber(ARGV[at])
    if target == 0 then
      redis.call('XADD', KEYS[2], '*', 'd', ARGV[at + 1])
    elseif target <= q then
      redis.call('XADD', KEYS[4 + n + target], '*', 'd', ARGV[at + 1])
    else
      local member = ARGV[at + 1]
      if redis.call('RPUSH', KEYS[4 + n + target], member) == 1 then
        local cut = string.find(member, '\n', 1, true)
        redis.call('XADD', KEYS[2], '*', 'd', string.sub(member, cut + 1))
        redis.call('HSET', KEYS[tail], KEYS[4 + n + target], '')
      else
        behind[target - q] = (behind[target - q] or 0) + 1
      end
    end
    at = at + 2
  end
end
for _, g in ipairs(batch_order) do
  local batch = batches[g]
  if #batch == 2 then
    redis.call('XADD', KEYS[2], '*', 'v', '2', 'd', batch[1], 'b', batch[2])
  else
    local fields = { KEYS[2], '*', 'v', '4' }
    for j = 1, #batch, 2 do
      local i = tostring((j - 1) / 2)
      fields[#fields + 1] = 'd' .. i
      fields[#fields + 1] = batch[j]
      fields[#fields + 1] = 'b' .. i
      fields[#fields + 1] = batch[j + 1]
    end
    redis.call('XADD', unpack(fields))
  end
end
if q > 0 then
  local names = {}
  for i = 1, q do
    names[i] = ARGV[at + i - 1]
  end
  redis.call('SADD', KEYS[3 + n], unpack(names))
  redis.call('XADD', KEYS[4 + n], 'MAXLEN', '~', '10000', '*', 's', table.concat(names, ' '))
end
-- The lines, less the waiting hash and the line index that follow them.
local lines = math.max(0, tail - 6 - n - q)
for l = 1, lines do
  if behind[l] then
    redis.call('HINCRBY', KEYS[tail - 1], ARGV[at + q + l - 1], behind[l])
  end
end
if seen_set then
  redis.call('PEXPIRE', seen_set, window)
end
local dropped = 0
if archive and ARGV[7] == 'drop-oldest' then
  dropped = redis.call('XTRIM', archive, 'MAXLEN', bound)
end
return {'OK', table.concat(skipped, ' '), tostring(dropped)}
