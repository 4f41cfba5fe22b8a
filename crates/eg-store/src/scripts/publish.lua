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
-- ARGV[1]  catalog version the caller matched against
-- ARGV[2]  N, the number of events     ARGV[3]  Q, the number of queue streams
-- then, per event in KEYS order: body, M (its number of deliveries), and M pairs of
-- (target, delivery record): target 0 = the ready stream, q = the q-th queue stream,
-- Q + l = the l-th line (its record is then a line member: delivery id, newline, record);
-- or body, 0 and one fan-out record: several push deliveries in one ready entry
-- (`FanOut` layout: v = 3, d = fan-out record, b = body; the first reader expands it, see
-- expand_fan_out.lua), and no event hash written yet
-- then Q subscription names (`<topic>/<subscription>`), in queue stream order
-- then L subscription names, in line order
--
-- A delivery pushed onto an empty line is its head: its record also goes to the ready
-- stream, and a line so started joins the line index (sweep_lines.lua looks there for
-- stuck lines). One pushed behind others waits (counted in the waiting hash) until
-- settles move the line on (line_steps.lua). Array order within a request is RPUSH order.
--
-- Returns {"OK"} or {"STALE", version} when the catalog changed after the caller's
-- snapshot (or vanished); nothing is written then, and the caller re-matches with a fresh catalog.
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
local at = 4
for i = 1, n do
  local body = ARGV[at]
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  if m == 0 then
    redis.call('XADD', KEYS[2], '*', 'v', '3', 'd', ARGV[at], 'b', body)
    at = at + 1
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
        redis.call('HSET', KEYS[#KEYS], KEYS[4 + n + target], '')
      else
        behind[target - q] = (behind[target - q] or 0) + 1
      end
    end
    at = at + 2
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
local lines = math.max(0, #KEYS - 6 - n - q)
for l = 1, lines do
  if behind[l] then
    redis.call('HINCRBY', KEYS[#KEYS - 1], ARGV[at + q + l - 1], behind[l])
  end
end
return {'OK'}
