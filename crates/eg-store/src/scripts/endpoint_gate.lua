-- The gate a sender passes before every attempt (or batch) to one endpoint: the same
-- machine as eg_core::probation::gate. Only this endpoint's hash is touched, so the
-- script runs on Redis Cluster. A missing key is an endpoint with a clear record.
--   on probation (u > now)           -> {'WAIT', u}
--   probing, another caller's lease  -> {'WAIT', lease end}
--   probing, no live lease           -> takes the lease: {'PROBE', now + lease}
--     (exactly one caller at a time probes once probation ends, never a stampede)
--   otherwise                        -> {'OPEN'}
--
-- KEYS[1]  the endpoint hash: f = consecutive failures, l = level, u = probation until
--          (ms), p = probe lease until (ms), o = last failure outcome, t = its time (ms);
--          named and decoded in eg_store::codec::probation (rename nothing here alone)
-- ARGV[1]  now, ms (the caller's clock, corrected to Redis's)
-- ARGV[2]  probe lease, ms (the delivery timeout)
-- ARGV[3]  key expiry, ms (refreshed whenever the hash is written)
local h = redis.call('HMGET', KEYS[1], 'u', 'p')
if not h[1] then
  return {'OPEN'}
end
local now = tonumber(ARGV[1])
local probation_until = tonumber(h[1])
if probation_until > now then
  return {'WAIT', h[1]}
end
if h[2] and tonumber(h[2]) > now then
  return {'WAIT', h[2]}
end
local lease_until = string.format('%d', now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'p', lease_until)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'PROBE', lease_until}
