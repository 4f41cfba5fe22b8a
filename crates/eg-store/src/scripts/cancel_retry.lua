-- Cancels a queued retry because the attempt it retries succeeded after all (a late
-- success, behaviour.md#retry-schedule-and-policy): removes the exact retry record and
-- releases its hold on the stored event. If the retry is no longer queued (already promoted
-- to the ready stream, or settled some other way), nothing changes and 0 is returned.
--
-- KEYS[1]  retry sorted set of the partition
-- KEYS[2]  the event hash (fields: b = body, r = deliveries outstanding)
-- ARGV[1]  the retry record, byte for byte as it was queued
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('HINCRBY', KEYS[2], 'r', -1) <= 0 then
  redis.call('DEL', KEYS[2])
end
return 1
