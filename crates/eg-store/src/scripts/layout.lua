-- Records the deployment's layout on first start; returns what is recorded.
--
-- KEYS[1]  partition count     KEYS[2]  key layout version
-- ARGV[1]  this process's partition count     ARGV[2]  this build's layout version
-- Returns {partition count, layout version}: a layout version is missing when the
-- partition count was recorded by a build from before layouts were versioned.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2])
end
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
