-- Moves deliveries of a paused set back into the ready stream: all of them once the
-- subscription is resumed (or deleted), or, while it stays paused, those whose
-- time-to-live has ended (the sender then dead-letters them with TimeToLiveExceeded).
-- Forgets the subscription in the paused index once its set is empty; parking adds it
-- in the same script that fills the set, so no delivery is ever left unindexed.
--
-- KEYS[1] the paused set (score = TTL deadline, ms)   KEYS[2] ready stream
-- KEYS[3] paused index
-- ARGV[1] highest score to move ('+inf' = all)   ARGV[2] most to move
-- ARGV[3] the subscription (`<topic>/<subscription>`)
-- Returns how many moved.
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(members) do
  redis.call('XADD', KEYS[2], '*', 'd', member)
  redis.call('ZREM', KEYS[1], member)
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[3])
end
return #members
