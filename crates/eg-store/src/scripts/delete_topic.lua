-- Deletes a topic with its keys and all its subscriptions.
--
-- KEYS[1]  topics hash   KEYS[2]  keys hash   KEYS[3]  subscriptions hash ("<topic>/<sub>" -> JSON)
-- KEYS[4]  subscription counts hash (topic key -> count)   KEYS[5]  catalog version
-- ARGV[1]  topic key
-- Returns {existed (1/0), new catalog version}.
local existed = redis.call('HDEL', KEYS[1], ARGV[1])
if existed == 0 then
  return {0, tonumber(redis.call('GET', KEYS[5]) or '0')}
end
redis.call('HDEL', KEYS[2], ARGV[1] .. '/key1', ARGV[1] .. '/key2')
local prefix = ARGV[1] .. '/'
local cursor = '0'
repeat
  local page = redis.call('HSCAN', KEYS[3], cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
  cursor = page[1]
  local fields = page[2]
  for i = 1, #fields, 2 do
    redis.call('HDEL', KEYS[3], fields[i])
  end
until cursor == '0'
redis.call('HDEL', KEYS[4], ARGV[1])
return {1, next_catalog_version(KEYS[5])}
