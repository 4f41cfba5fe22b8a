-- Prepended to every script that changes the catalog.
--
-- The next catalog version: one more than the current, and never below Redis's clock in
-- microseconds. So the version keeps rising even after Redis lost its data: a process
-- holding a catalog copy from before the loss never mistakes a rebuilt catalog for its
-- own (its cached version is always lower than any version written since). Microseconds,
-- not milliseconds: a burst of writes within one millisecond ran the version ahead of a
-- millisecond clock, so a rebuild right after could reuse it; no script runs in under a
-- microsecond. (2^53 microseconds is the year 2255, inside a double's exact range.)
local function next_catalog_version(key)
  local time = redis.call('TIME')
  local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local version = math.max(tonumber(redis.call('GET', key) or '0') + 1, now_us)
  redis.call('SET', key, string.format('%.0f', version))
  return version
end

