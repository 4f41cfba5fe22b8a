-- Sends archived dead-letter records back into delivery, each at most once: a record
-- is redriven only while it is still in the not-yet-redriven set, and leaves that set
-- in the same step, so running a redrive twice (or two at once) delivers nothing twice.
-- The event is stored again under a new key with one outstanding delivery; the record
-- stays in the archive, marked with the redrive time, until it is purged.
--
-- KEYS[1] archive: ids not redriven yet   KEYS[2] archive: record id -> entry \n body
-- KEYS[3] ready stream                    KEYS[3 + i] the new event hash of record i
-- ARGV[1] now, ms; then for record i: ARGV[2i] its id, ARGV[2i + 1] the new delivery record
-- Returns how many were redriven.
local redriven = 0
for i = 1, #KEYS - 3 do
  local id = ARGV[2 * i]
  if redis.call('ZSCORE', KEYS[1], id) then
    redis.call('ZREM', KEYS[1], id)
    local record = redis.call('HGET', KEYS[2], id)
    if record then
      local newline = string.find(record, '\n', 1, true)
      if newline then
        redis.call('HSET', KEYS[3 + i], 'b', string.sub(record, newline + 1), 'r', 1)
        redis.call('XADD', KEYS[3], '*', 'd', ARGV[2 * i + 1])
        redis.call('HSET', KEYS[2], id .. ':r', ARGV[1])
        redriven = redriven + 1
      end
    end
  end
end
return redriven
