-- Adds one flush of a process's counter increments to a stats bucket, exactly once.
--
-- KEYS[1]  the bucket hash, {<p>:stats}:<unix seconds / 10>; field `<kind>|<label>` -> count
-- KEYS[2]  the writing process's last applied flush, {<p>:stats}:writer:<writer id>
-- ARGV[1]  this flush's sequence number (each writer numbers its flushes 1, 2, 3, …
--          and sends the next only after this one was applied)
-- ARGV[2]  how long both keys live after this write, in seconds
-- ARGV[3…] field, increment, field, increment, …
--
-- Returns 1 when applied, 0 when this flush had already been applied (a retry after
-- an answer that was lost): a retried flush never counts twice.
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local seq = tonumber(ARGV[1])
if seq <= last then
  return 0
end
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return 1
