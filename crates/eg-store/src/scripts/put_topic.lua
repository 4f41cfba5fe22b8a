-- Creates or updates a topic; on creation its two access keys are set.
--
-- KEYS[1]  topics hash (topic key -> topic JSON)   KEYS[2]  keys hash ("<topic>/key1" -> key)
-- KEYS[3]  catalog version
-- ARGV[1]  topic key   ARGV[2]  topic JSON   ARGV[3]  new key1   ARGV[4]  new key2
-- Returns {created (1/0), new catalog version}.
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1] .. '/key1', ARGV[3])
redis.call('HSETNX', KEYS[2], ARGV[1] .. '/key2', ARGV[4])
return {created, next_catalog_version(KEYS[3])}
