-- Records one finished attempt in its endpoint's probation record: the same machine as
-- eg_core::probation::ProbationPolicy::record. Only this endpoint's hash is touched.
--   success  -> the hash is deleted (the record resets; one successful probe ends probation)
--               {'OK', 1 if it had been on probation else 0}
--   failure  -> f + 1, o and t remembered, expiry refreshed; then
--     on probation or probing, attempt started before u (it was in flight when probation
--     began): nothing else changes               {'ONPROBATION', f, u}
--     not on probation, f < threshold            {'FAILED', f}
--     otherwise (threshold reached, or a probe failed): the next probation:
--       l + 1, u = now + ladder[min(l, #ladder)], probe lease cleared
--                                                 {'PROBATION', f, l, u, length ms}
--
-- KEYS[1]  the endpoint hash: f = consecutive failures, l = level, u = probation until
--          (ms), p = probe lease until (ms), o = last failure outcome, t = its time (ms);
--          named and decoded in eg_store::codec::probation (rename nothing here alone)
-- ARGV[1]  now: when the attempt finished, ms     ARGV[2]  when it started, ms
-- ARGV[3]  'success' | 'failure'                  ARGV[4]  outcome name
-- ARGV[5]  failure threshold                      ARGV[6]  key expiry, ms
-- ARGV[7..] failure only: the probation lengths for this outcome, ms, by level (the
--          last repeats), computed by eg_core::probation::ProbationPolicy::ladder
if ARGV[3] == 'success' then
  local was_on_probation = redis.call('HEXISTS', KEYS[1], 'u')
  redis.call('DEL', KEYS[1])
  return {'OK', was_on_probation}
end
local steps = #ARGV - 6
if steps < 1 then
  return redis.error_reply('endpoint_record: a failure needs the probation lengths')
end
local failures = redis.call('HINCRBY', KEYS[1], 'f', 1)
redis.call('HSET', KEYS[1], 'o', ARGV[4], 't', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
local probation_until = redis.call('HGET', KEYS[1], 'u')
if probation_until then
  if tonumber(ARGV[2]) < tonumber(probation_until) then
    return {'ONPROBATION', failures, probation_until}
  end
elseif failures < tonumber(ARGV[5]) then
  return {'FAILED', failures}
end
local level = redis.call('HINCRBY', KEYS[1], 'l', 1)
local length = tonumber(ARGV[6 + math.min(level, steps)])
local new_until = string.format('%d', tonumber(ARGV[1]) + length)
redis.call('HSET', KEYS[1], 'u', new_until)
redis.call('HDEL', KEYS[1], 'p')
return {'PROBATION', failures, level, new_until, length}
