-- Finishes dead-letter records (written, or given up on): acknowledges and deletes their
-- stream entries and forgets their object names in one step, so a name is kept exactly
-- as long as a record of it is in the stream.
--
-- KEYS[1] dead-letter stream
-- KEYS[2] entry id -> object name
-- KEYS[3] object name -> its entry ids still in the stream, space-separated
-- ARGV[1] consumer group      ARGV[2..] entry ids
-- Returns how many were still pending.
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('XDEL', KEYS[1], unpack(ids))

local met, order = {}, {}
for _, id in ipairs(ids) do
  local name = redis.call('HGET', KEYS[2], id)
  if name then
    redis.call('HDEL', KEYS[2], id)
    if not met[name] then
      met[name] = true
      order[#order + 1] = name
    end
  end
end
for _, name in ipairs(order) do
  local left = {}
  for id in string.gmatch(redis.call('HGET', KEYS[3], name) or '', '%S+') do
    if redis.call('HEXISTS', KEYS[2], id) == 1 then left[#left + 1] = id end
  end
  if #left == 0 then
    redis.call('HDEL', KEYS[3], name)
  else
    redis.call('HSET', KEYS[3], name, table.concat(left, ' '))
  end
end
return acked
