-- Cancels a queued retry because the attempt it retries succeeded after all (a late
-- success, behaviour.md#retry-schedule-and-policy): removes the exact retry record and
-- releases its hold on the stored event. If the retry is no longer queued (already promoted
-- to the ready stream, or settled some other way), nothing changes and 0 is returned.
-- A late success is a terminal outcome: for a delivery of an ordered subscription its
-- key's line moves on (advance_line, line_steps.lua, sent in front of this file).
--
-- KEYS[1]  retry sorted set of the partition
-- KEYS[2]  the event hash (fields: b = body, r = deliveries outstanding)
-- KEYS[3]  the ready stream of the partition (only read with a line marker)
-- ARGV[1]  the retry record, byte for byte as it was queued
-- ARGV[2]  the delivery's line marker (codec::line_marker), '' when unordered
-- ARGV[3]  its subscription (`<topic>/<subscription>`)
-- ARGV[4]  given only when the attempt's entry carried the body: the body it sent; the
--          retry may then be a carried one, member `record\nbody` (settle_steps.lua),
--          which holds no event hash to release
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  if #ARGV < 4 or redis.call('ZREM', KEYS[1], ARGV[1] .. '\n' .. ARGV[4]) == 0 then
    return 0
  end
elseif redis.call('HINCRBY', KEYS[2], 'r', -1) <= 0 then
  redis.call('DEL', KEYS[2])
end
if ARGV[2] and ARGV[2] ~= '' then
  advance_line(ARGV[2], KEYS[3], ARGV[3])
end
return 1
