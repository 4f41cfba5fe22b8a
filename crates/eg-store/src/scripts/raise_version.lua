-- Raises a partition's copy of the catalog version, never lowers it (two admin calls
-- may finish in either order).
--
-- KEYS[1]  the partition's catalog version     ARGV[1]  the catalog version
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
