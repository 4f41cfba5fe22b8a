-- Enqueues one chunk of a replay job's events and moves the job's position past them, all
-- or nothing (archive.md, "Replay"): only while the job runs and stands where the caller
-- read it, so a chunk is enqueued at most once even when two workers hold the same job
-- (a lease lapsed) or a worker retries after a lost answer. All keys share the tag of
-- the partition the job lives in.
--
-- KEYS[1]  the job (hash)         KEYS[2]  catalog version seen by this partition
-- KEYS[3]  push: the ready stream; queue mode: the subscription's queue stream
-- KEYS[4]  queue mode: the partition's queues index   KEYS[5]  the queue signal stream
-- KEYS[5 + i]  queue mode: the event hash of event i (fields b = body, r = 1)
-- ARGV[1]  the position the caller read   ARGV[2]  the position after this chunk
-- ARGV[3]  catalog version the caller matched against
-- ARGV[4]  archived entries read by this chunk   ARGV[5]  of those, held back by filters
-- ARGV[6]  now, ms   ARGV[7]  "push" or "queue"   ARGV[8]  queue mode: `<topic>/<subscription>`
-- then per event: its delivery record, its body
-- Returns {"OK"}, {"MOVED"} (the job is elsewhere: another worker moved it),
-- {"NOT_RUNNING", state} or {"STALE", version}; nothing is written but on "OK".
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'Running' then
  return {'NOT_RUNNING', state or ''}
end
if (redis.call('HGET', KEYS[1], 'position') or '') ~= ARGV[1] then
  return {'MOVED'}
end
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if seen > tonumber(ARGV[3]) then
  return {'STALE', tostring(seen)}
end
local events = (#ARGV - 8) / 2
if ARGV[7] == 'queue' then
  if redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('XGROUP', 'CREATE', KEYS[3], 'receivers', '0', 'MKSTREAM')
  end
  for i = 1, events do
    redis.call('HSET', KEYS[5 + i], 'b', ARGV[8 + 2 * i], 'r', 1)
    redis.call('XADD', KEYS[3], '*', 'd', ARGV[7 + 2 * i])
  end
  if events > 0 then
    redis.call('SADD', KEYS[4], ARGV[8])
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', '10000', '*', 's', ARGV[8])
  end
else
  -- One push delivery per event: the body travels in its ready entry (codec's Carried layout).
  for i = 1, events do
    redis.call('XADD', KEYS[3], '*', 'v', '2', 'd', ARGV[7 + 2 * i], 'b', ARGV[8 + 2 * i])
  end
end
redis.call('HSET', KEYS[1], 'position', ARGV[2], 'updated', ARGV[6])
redis.call('HINCRBY', KEYS[1], 'read', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'filtered', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'replayed', events)
return {'OK'}
