-- Removes archived dead-letter records for good (whether redriven or not).
--
-- KEYS[1] archive: every record id   KEYS[2] archive: ids not redriven yet
-- KEYS[3] archive: record id -> entry \n body
-- ARGV    the record ids
-- Returns how many records were removed.
local purged = 0
for _, id in ipairs(ARGV) do
  purged = purged + redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id, id .. ':r')
end
return purged
