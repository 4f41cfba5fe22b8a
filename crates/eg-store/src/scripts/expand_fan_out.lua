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
-- Batch entries (`Batch` layout: v = 4, d<i> = record, b<i> = body) are expanded the
-- same way, with M = 0: each delivery not settled becomes a `Carried` entry of its own
-- record and body, taken from the entry itself (no event hash: KEYS[1+i] is unused).
-- stream_steps.lua is sent in front of this file.
--
-- KEYS[1]  ready stream
-- KEYS[1+i]  the event hash of entry i (a batch entry: the ready stream, unused)
-- ARGV[1]  consumer group   ARGV[2]  N, the number of entries
-- then per entry: its id, M, and M delivery records (record j is delivery index j - 1);
-- M = 0 for a batch entry
-- Returns how many entries were expanded.
local group = ARGV[1]
local n = tonumber(ARGV[2])
local at = 3
local expanded = 0

-- Adds a `Carried` entry for each delivery of batch entry `fields` (its field list) not
-- in `settled`.
local function split_batch(fields, settled)
  local records, bodies = {}, {}
  for j = 1, #fields, 2 do
    local index = tonumber(string.sub(fields[j], 2))
    if index then
      local kind = string.byte(fields[j])
      if kind == 100 then -- 'd'
        records[index] = fields[j + 1]
      elseif kind == 98 then -- 'b'
        bodies[index] = fields[j + 1]
      end
    end
  end
  local index = 0
  while records[index] do
    if not settled[index] then
      if bodies[index] then
        redis.call('XADD', KEYS[1], '*', 'v', '2', 'd', records[index], 'b', bodies[index])
      else
        -- Never written so; read alone, it is reported and removed as not a delivery.
        redis.call('XADD', KEYS[1], '*', 'v', '2', 'd', records[index])
      end
    end
    index = index + 1
  end
end

for i = 1, n do
  local id = ARGV[at]
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  if redis.call('XACK', KEYS[1], group, id) == 1 then
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    local body = nil
    if entry and m > 0 then
      for j = 1, #entry[2], 2 do
        if entry[2][j] == 'b' then
          body = entry[2][j + 1]
        end
      end
    end
    redis.call('XDEL', KEYS[1], id)
    local marks = KEYS[1] .. ':shared:' .. id
    local settled = {}
    for _, index in ipairs(redis.call('SMEMBERS', marks)) do
      settled[tonumber(index)] = true
    end
    redis.call('DEL', marks)
    if entry and m == 0 then
      split_batch(entry[2], settled)
      expanded = expanded + 1
    elseif body then
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
