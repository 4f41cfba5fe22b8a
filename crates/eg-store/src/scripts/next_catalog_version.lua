-- Prepended to every script that changes the catalog.
--
-- The next catalog version: one more than the current, and never below Redis's clock in
-- milliseconds. So the version keeps rising even after Redis lost its data: a process
-- holding a catalog copy from before the loss never mistakes a rebuilt catalog for its
-- own (its cached version is always lower than any version written since).
local function next_catalog_version(key)
  local time = redis.call('TIME')
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local version = math.max(tonumber(redis.call('GET', key) or '0') + 1, now_ms)
  redis.call('SET', key, string.format('%.0f', version))
  return version
end

