-- Deletes a subscription.
--
-- KEYS[1]  subscriptions hash   KEYS[2]  subscription counts hash   KEYS[3]  catalog version
-- ARGV[1]  topic key            ARGV[2]  "<topic>/<sub>"
-- Returns {existed (1/0), catalog version}.
if redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then
  return {0, tonumber(redis.call('GET', KEYS[3]) or '0')}
end
redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
return {1, next_catalog_version(KEYS[3])}
