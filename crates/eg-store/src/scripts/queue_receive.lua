-- Grants locks on up to COUNT events of one queue subscription in one partition (pull
-- delivery), atomically, so concurrent receivers (any ingress copy) never get the same
-- entry under the same lock: first entries whose lock expired (XAUTOCLAIM with min-idle
-- = the lock duration: Redis raises their delivery counter and restarts their idle
-- time), then entries never delivered (XREADGROUP). A lock is the entry's place in the
-- group's pending list; it expires when the entry has been idle for the lock duration.
--
-- KEYS[1]  the queue stream (group `receivers`)
-- KEYS[2]  where the expired-lock scan goes on from (string; absent = from the start):
--          one XAUTOCLAIM looks at about ten times COUNT pending entries, and expired
--          locks may sit behind many live (renewed) ones
-- ARGV[1]  consumer group   ARGV[2]  consumer   ARGV[3]  lock duration, ms
-- ARGV[4]  most entries to lock
-- Returns a flat list: entry id, delivery record, the entry's delivery counter, … per
-- entry locked (empty when there is nothing, or no queue yet).
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local want = tonumber(ARGV[4])
if redis.call('EXISTS', stream) == 0 then
  return {}
end
local out = {}
local got = 0
local function record_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'd' then
      return fields[i + 1]
    end
  end
  return ''
end
local cursor = redis.call('GET', KEYS[2]) or '0-0'
local claimed = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[3], cursor, 'COUNT', want)
if claimed[1] == '0-0' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], claimed[1])
end
for _, entry in ipairs(claimed[2]) do
  if entry[2] then
    local pending = redis.call('XPENDING', stream, group, entry[1], entry[1], 1)
    local count = pending[1] and pending[1][4] or 1
    out[#out + 1] = entry[1]
    out[#out + 1] = record_of(entry[2])
    out[#out + 1] = count
    got = got + 1
  end
end
if got < want then
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want - got, 'STREAMS', stream, '>')
  if read and read[1] then
    for _, entry in ipairs(read[1][2]) do
      out[#out + 1] = entry[1]
      out[#out + 1] = record_of(entry[2])
      out[#out + 1] = 1
    end
  end
end
return out
