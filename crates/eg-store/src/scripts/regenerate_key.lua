-- Replaces one access key of a topic.
--
-- KEYS[1]  topics hash   KEYS[2]  keys hash   KEYS[3]  catalog version
-- ARGV[1]  topic key     ARGV[2]  key1 | key2  ARGV[3]  the new key
-- Returns the new catalog version, or 0 when the topic does not exist.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1] .. '/' .. ARGV[2], ARGV[3])
return next_catalog_version(KEYS[3])
