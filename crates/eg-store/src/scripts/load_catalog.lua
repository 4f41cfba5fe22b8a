-- Reads the whole catalog at one version, so a reader never sees half a change.
--
-- KEYS[1]  catalog version   KEYS[2]  topics hash   KEYS[3]  keys hash   KEYS[4]  subscriptions hash
-- Returns {version, topics (flat field/value list), keys (same), subscriptions (same)}.
return {
  tonumber(redis.call('GET', KEYS[1]) or '0'),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[3]),
  redis.call('HGETALL', KEYS[4]),
}
