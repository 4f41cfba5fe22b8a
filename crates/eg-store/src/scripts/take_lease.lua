-- Takes a lease for a holder, or renews it when the holder has it already; one step, so a
-- lease that expires between the check and the renewal is never renewed for its new
-- holder by the old one.
--
-- KEYS[1] the lease (a string: its holder)
-- ARGV[1] holder      ARGV[2] time to live (ms)
-- Returns 1 when the holder holds the lease now, 0 when another does.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
