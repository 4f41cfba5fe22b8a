-- Ends a replay job that still runs (archive.md, "Replay"): Succeeded, Failed or
-- Cancelled, with an optional problem; a job already ended keeps its end, so a worker
-- finishing a job cancelled meanwhile does not undo the cancel. A finished job is kept
-- for `retain` ms, then expires (its index entry goes at the next listing).
--
-- KEYS[1]  the job (hash)
-- ARGV[1]  the end state   ARGV[2]  now, ms   ARGV[3]  retain, ms   ARGV[4]  problem ('' none)
-- Returns the job's state after the call ('' when there is no such job).
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return ''
end
if state ~= 'Running' then
  return state
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finished', ARGV[2], 'updated', ARGV[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'problem', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return ARGV[1]
