-- Records finished attempts in their endpoint's probation record, in order: the same
-- machine as eg_core::probation::ProbationPolicy::record, applied to each result as if
-- each were its own call. A sender gathers the results of one endpoint that finish
-- while its previous call is in flight, so a busy endpoint costs one call per round
-- trip instead of one per attempt. Only this endpoint's hash is touched.
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
-- ARGV[1]  failure threshold      ARGV[2]  key expiry, ms      ARGV[3]  N, the results
-- then per result, from a = 3 (each result moves a past its own arguments):
-- ARGV[a+1]  now: when the attempt finished, ms     ARGV[a+2]  when it started, ms
-- ARGV[a+3]  'success' | 'failure'                  ARGV[a+4]  outcome name
-- ARGV[a+5]  L, then ARGV[a+6 .. a+5+L]: failure only (L = 0 for a success), the
--            probation lengths for this outcome, ms, by level (the last repeats),
--            computed by eg_core::probation::ProbationPolicy::ladder
-- Returns one reply per result, in order.
local threshold, expiry = tonumber(ARGV[1]), ARGV[2]

local function record(a)
  if ARGV[a + 3] == 'success' then
    local was_on_probation = redis.call('HEXISTS', KEYS[1], 'u')
    redis.call('DEL', KEYS[1])
    return {'OK', was_on_probation}
  end
  local steps = tonumber(ARGV[a + 5])
  if steps < 1 then
    return redis.error_reply('endpoint_record: a failure needs the probation lengths')
  end
  local failures = redis.call('HINCRBY', KEYS[1], 'f', 1)
  redis.call('HSET', KEYS[1], 'o', ARGV[a + 4], 't', ARGV[a + 1])
  redis.call('PEXPIRE', KEYS[1], expiry)
  local probation_until = redis.call('HGET', KEYS[1], 'u')
  if probation_until then
    if tonumber(ARGV[a + 2]) < tonumber(probation_until) then
      return {'ONPROBATION', failures, probation_until}
    end
  elseif failures < threshold then
    return {'FAILED', failures}
  end
  local level = redis.call('HINCRBY', KEYS[1], 'l', 1)
  local length = tonumber(ARGV[a + 5 + math.min(level, steps)])
  local new_until = string.format('%d', tonumber(ARGV[a + 1]) + length)
  redis.call('HSET', KEYS[1], 'u', new_until)
  redis.call('HDEL', KEYS[1], 'p')
  return {'PROBATION', failures, level, new_until, length}
end

local replies, a = {}, 3
for i = 1, tonumber(ARGV[3]) do
  local reply = record(a)
  if reply.err then
    return reply
  end
  replies[i] = reply
  a = a + 5 + tonumber(ARGV[a + 5])
end
return replies
