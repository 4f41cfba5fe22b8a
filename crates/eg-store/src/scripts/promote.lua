-- Moves members whose time has come from a sorted set into a stream, atomically, so any
-- number of schedulers can run at once with no leader: a member is moved exactly once.
-- Used for due retries (retry set -> ready stream) and for dead-letter records whose
-- batching delay has passed (delay set -> dead-letter stream). Time is the server's.
--
-- KEYS[1]  sorted set (score = ms)     KEYS[2]  stream
-- ARGV[1]  stream field name           ARGV[2]  at most this many members
-- ARGV[3]  delay, ms: members with score <= now - delay are due
-- ARGV[4]  '1' for the retry set: a carried retry (member `record\nbody`, settle_steps.lua)
--          becomes a `Carried` entry (v = 2, d = record, b = body), which every release
--          since the `Carried` layout reads; any other member is written whole to ARGV[1],
--          as every member is when ARGV[4] is absent or anything else (dead-letter
--          records, pull delivery's delayed releases)
-- Returns {the number moved, ms until the earliest member left falls due (0 if it is
-- due already, -1 if none is left)}: by the server's clock, so the caller can sleep
-- for it whatever its own clock says.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGE', KEYS[1], '-inf', now - tonumber(ARGV[3]), 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
local carried = ARGV[4] == '1'
for _, member in ipairs(due) do
  local cut = carried and string.find(member, '\n', 1, true)
  if cut then
    redis.call('XADD', KEYS[2], '*', 'v', '2', ARGV[1], string.sub(member, 1, cut - 1), 'b', string.sub(member, cut + 1))
  else
    redis.call('XADD', KEYS[2], '*', ARGV[1], member)
  end
end
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = -1
if first[2] then
  wait = math.max(0, tonumber(first[2]) - tonumber(ARGV[3]) - now)
end
return {#due, wait}
