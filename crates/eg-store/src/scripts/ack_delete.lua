-- Acknowledges and deletes stream entries in one step (never trim a work stream by
-- length: that would drop entries still pending or unread).
--
-- KEYS[1]  stream      ARGV[1]  consumer group      ARGV[2..]  entry ids
-- Returns how many were still pending.
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('XDEL', KEYS[1], unpack(ids))
return acked
