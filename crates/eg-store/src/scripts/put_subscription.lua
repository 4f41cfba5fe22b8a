-- Creates or updates a subscription of an existing topic, within the per-topic limit.
-- A conditional write (ARGV[5] = '1') happens only if the topic and the subscription are
-- still stored exactly as the caller read them when it decided the write (the topic's
-- schema, the previous subscription's state and validation): a change in between makes
-- the caller read and decide again instead of being undone.
--
-- KEYS[1]  topics hash   KEYS[2]  subscriptions hash   KEYS[3]  subscription counts hash
-- KEYS[4]  catalog version
-- ARGV[1]  topic key     ARGV[2]  "<topic>/<sub>"       ARGV[3]  subscription JSON
-- ARGV[4]  most subscriptions a topic may have
-- ARGV[5]  '1' for a conditional write   ARGV[6]  the topic JSON read
-- ARGV[7]  the subscription JSON read ('' if there was none)
-- Returns {"OK", created (1/0), new catalog version} or {"NO_TOPIC"} or {"LIMIT"} or
-- {"CHANGED"}.
if ARGV[5] == '1' then
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[6]
      or (redis.call('HGET', KEYS[2], ARGV[2]) or '') ~= ARGV[7] then
    return {'CHANGED'}
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return {'NO_TOPIC'}
end
local exists = redis.call('HEXISTS', KEYS[2], ARGV[2])
if exists == 0 then
  if tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0') >= tonumber(ARGV[4]) then
    return {'LIMIT'}
  end
  redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return {'OK', 1 - exists, next_catalog_version(KEYS[4])}
