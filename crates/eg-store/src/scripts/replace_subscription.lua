-- Replaces a subscription only if it is still stored exactly as the caller read it: a
-- change derived from the old record (a manual validation) never undoes an update or a
-- delete that came in between.
--
-- KEYS[1]  subscriptions hash   KEYS[2]  catalog version
-- ARGV[1]  "<topic>/<sub>"      ARGV[2]  the JSON the caller read   ARGV[3]  the new JSON
-- Returns the new catalog version, or 0 if the subscription changed or is gone.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return next_catalog_version(KEYS[2])
