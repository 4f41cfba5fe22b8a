-- Creates or updates a topic; on creation its two access keys are set. Written only if
-- the topic is still stored exactly as the caller saw it when it checked the new one
-- against it (no other write came in between), so that check cannot be raced.
--
-- KEYS[1]  topics hash (topic key -> topic JSON)   KEYS[2]  keys hash ("<topic>/key1" -> key)
-- KEYS[3]  catalog version
-- ARGV[1]  topic key   ARGV[2]  topic JSON   ARGV[3]  new key1   ARGV[4]  new key2
-- ARGV[5]  the topic JSON the caller saw ('' if none was stored)
-- Returns {created (1/0), new catalog version}, or {-1, 0} if the stored topic changed.
local stored = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if stored ~= ARGV[5] then
  return {-1, 0}
end
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1] .. '/key1', ARGV[3])
redis.call('HSETNX', KEYS[2], ARGV[1] .. '/key2', ARGV[4])
return {created, next_catalog_version(KEYS[3])}
