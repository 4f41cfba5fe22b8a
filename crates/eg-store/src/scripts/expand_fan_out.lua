-- Expands fan-out entries (`FanOut` layout: v = 3, d = fan-out record, b = body) that a reader
-- of the ready stream holds: for each, the event's body goes into its event hash with
-- one outstanding delivery per subscription, one `EventHash` entry per delivery is added
-- to the ready stream (read next, by any sender), and the fan-out entry is acknowledged
-- and deleted, all in one step. The records are built by the caller from the fan-out
-- record (codec::decode_fan_out), so their form is defined once, in Rust.
-- An entry no longer pending (another reader expanded it first: a reclaim after the
-- visibility timeout) is left alone, so a fan-out is expanded exactly once.
-- Senders deliver fan-out entries from the entry itself (settle.lua): an entry taken
-- back from a holder that settled some of its deliveries expands only the others (the
-- indexes in `<ready stream>:shared:<entry id>` are settled), and the event hash may
-- already count deliveries of the event that live on: the count is added to.
-- stream_steps.lua is sent in front of this file.
--
-- KEYS[1]  ready stream
-- KEYS[1+i]  the event hash of entry i
-- ARGV[1]  consumer group   ARGV[2]  N, the number of entries
-- then per entry: its id, M, and M delivery records (record j is delivery index j - 1)
-- Returns how many entries were expanded.
local group = ARGV[1]
local n = tonumber(ARGV[2])
local at = 3
local expanded = 0
for i = 1, n do
  local id = ARGV[at]
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  if redis.call('XACK', KEYS[1], group, id) == 1 then
    local body = entry_field(KEYS[1], id, 'b')
    redis.call('XDEL', KEYS[1], id)
    local marks = KEYS[1] .. ':shared:' .. id
    local settled = {}
    for _, index in ipairs(redis.call('SMEMBERS', marks)) do
      settled[tonumber(index)] = true
    end
    redis.call('DEL', marks)
    if body then
      local left = 0
      for j = 0, m - 1 do
        if not settled[j] then
          redis.call('XADD', KEYS[1], '*', 'd', ARGV[at + j])
          left = left + 1
        end
      end
      if left > 0 then
        redis.call('HSET', KEYS[1 + i], 'b', body)
        redis.call('HINCRBY', KEYS[1 + i], 'r', left)
      end
      expanded = expanded + 1
    end
  end
  at = at + m
end
return expanded
