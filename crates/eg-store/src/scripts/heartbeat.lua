-- A tier process announces itself: sets its heartbeat and forgets copies whose last
-- heartbeat is older than the cutoff (a process killed without leaving), so the hash
-- holds only recent copies however often processes are replaced.
--
-- KEYS[1]  the heartbeats hash: field <tier>/<instance> -> "<last seen ms> <started ms> <version> <capabilities>"
-- ARGV[1]  this process's field
-- ARGV[2]  its value (codec::heartbeat)
-- ARGV[3]  cutoff (ms): fields last seen before it are deleted
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local cutoff = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+)'))
  if seen == nil or seen < cutoff then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return 1
