-- Creates or updates a subscription of an existing topic, within the per-topic limit.
--
-- KEYS[1]  topics hash   KEYS[2]  subscriptions hash   KEYS[3]  subscription counts hash
-- KEYS[4]  catalog version
-- ARGV[1]  topic key     ARGV[2]  "<topic>/<sub>"       ARGV[3]  subscription JSON
-- ARGV[4]  most subscriptions a topic may have
-- Returns {"OK", created (1/0), new catalog version} or {"NO_TOPIC"} or {"LIMIT"}.
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
