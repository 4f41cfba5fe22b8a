-- Stores the events of one publish request and enqueues their deliveries, all or nothing.
-- All keys share the partition's hash tag.
--
-- KEYS[1]  catalog version seen by this partition (string)
-- KEYS[2]  ready stream of the partition
-- KEYS[3..2+N]  one event hash per event (fields: b = body, r = deliveries outstanding)
-- ARGV[1]  catalog version the caller matched against
-- ARGV[2]  N, the number of events
-- then, per event in KEYS order: body, M (its number of deliveries), M delivery records
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
local at = 3
for i = 1, n do
  local body = ARGV[at]
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  redis.call('HSET', KEYS[2 + i], 'b', body, 'r', m)
  for _ = 1, m do
    redis.call('XADD', KEYS[2], '*', 'd', ARGV[at])
    at = at + 1
  end
end
return {'OK'}
