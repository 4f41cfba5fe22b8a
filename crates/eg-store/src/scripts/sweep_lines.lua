-- Sweeps stuck ordering lines of one partition (docs/ordered-delivery.md#stuck-lines): a
-- line whose head delivery Redis lost (its ready entry, retry or paused record gone) would
-- keep its key waiting for ever. Sent after line_steps.lua (advance_line).
--
-- KEYS[1]  line index (hash: line key -> the head delivery id the last sweep saw there)
-- KEYS[2]  ready stream      KEYS[3]  retry sorted set
-- KEYS[4]  waiting hash (`<topic>/<subscription>` -> deliveries behind a head)
-- ARGV[1]  HSCAN cursor of the index ('0' to start a pass)
-- ARGV[2]  about how many lines to look at (HSCAN COUNT)
-- ARGV[3]  most records a census may read (ready entries, retries, paused records)
-- ARGV[4]  the partition's tag with braces, in front of the event hashes
--          (`<tag>:event:<event key>`) and paused sets (`<tag>:paused:<subscription>`)
--          this script names: keys of this slot, like the lines the index names
--
-- A line is suspect only when the last sweep saw the same head there: a moving line is
-- never looked at twice. Suspects are checked by one census of the partition: every
-- ready entry (held by a sender or not), every retry and the suspects' subscriptions'
-- paused records. A record is matched to a head by the start of its JSON up to the end of
-- the delivery id (`{"id":"…"`): the same id gives the same bytes, so a live head is
-- always found (two ids sharing that start would only keep a line from being swept).
-- The census is in one call, so a head moving between places cannot be missed. When
-- the records to read exceed ARGV[3], nothing is swept this time (answered 'busy').
--
-- A head found nowhere is lost. If its event hash survives, its own record goes back to
-- the ready stream ('requeued': delivered again, at least once, order kept). Otherwise
-- its event is gone too: the head leaves the line and the next member is released
-- ('dropped', advance_line).
--
-- Returns {next cursor ('0': the pass is over), lines looked at, census ('none', 'done'
-- or 'busy'), {per swept line: subscription, delivery id, action}}.
local cursor, fields = unpack(redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', tonumber(ARGV[2])))
local tag = ARGV[4]

-- The start of a delivery record up to the end of its id: `{"id":"<id as JSON>"`.
local function id_start(record)
  local stop = string.find(record, '","', 8, true)
  if stop then
    return string.sub(record, 1, stop)
  end
  return record
end

local suspects = {}
local missing = {}
local left = 0
for j = 1, #fields, 2 do
  local line, seen = fields[j], fields[j + 1]
  local head = redis.call('LINDEX', line, 0)
  if not head then
    redis.call('HDEL', KEYS[1], line)
  else
    local cut = string.find(head, '\n', 1, true) or #head
    local id = string.sub(head, 1, cut - 1)
    if seen ~= id then
      redis.call('HSET', KEYS[1], line, id)
    else
      local record = string.sub(head, cut + 1)
      local ok, decoded = pcall(cjson.decode, record)
      if ok and type(decoded) == 'table' then
        local start = id_start(record)
        suspects[#suspects + 1] = {
          line = line,
          id = id,
          record = record,
          start = start,
          subscription = tostring(decoded.t) .. '/' .. tostring(decoded.s),
          event = (decoded.ev ~= nil and decoded.ev ~= '') and tostring(decoded.ev) or id,
        }
        if not missing[start] then
          missing[start] = true
          left = left + 1
        end
      end
    end
  end
end

local looked = #fields / 2
if #suspects == 0 then
  return { cursor, looked, 'none', {} }
end

local paused = {}
local size = redis.call('XLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])
for _, s in ipairs(suspects) do
  local key = tag .. ':paused:' .. s.subscription
  if not paused[key] then
    paused[key] = true
    size = size + redis.call('ZCARD', key)
  end
end
if size > tonumber(ARGV[3]) then
  return { cursor, looked, 'busy', {} }
end

local function strike(record)
  if left > 0 and record then
    local start = id_start(record)
    if missing[start] then
      missing[start] = nil
      left = left - 1
    end
  end
end
for _, entry in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do
  local f = entry[2]
  for k = 1, #f, 2 do
    if f[k] == 'd' then
      strike(f[k + 1])
    end
  end
end
if left > 0 then
  for _, record in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    strike(record)
  end
end
for key in pairs(paused) do
  if left > 0 then
    for _, record in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      strike(record)
    end
  end
end

local swept = {}
for _, s in ipairs(suspects) do
  if missing[s.start] then
    -- Two suspects never share a head, but guard the second of a shared start anyway.
    missing[s.start] = nil
    local action
    if redis.call('EXISTS', tag .. ':event:' .. s.event) == 1 then
      redis.call('XADD', KEYS[2], '*', 'd', s.record)
      action = 'requeued'
    else
      local marker = 'L' .. s.id .. '\n' .. s.line .. '\n' .. KEYS[4] .. '\n' .. KEYS[1]
      advance_line(marker, KEYS[2], s.subscription)
      action = 'dropped'
    end
    -- Seen afresh by the next sweep: it has only just been put back or replaced.
    if redis.call('EXISTS', s.line) == 1 then
      redis.call('HSET', KEYS[1], s.line, '')
    end
    swept[#swept + 1] = s.subscription
    swept[#swept + 1] = s.id
    swept[#swept + 1] = action
  end
end
return { cursor, looked, 'done', swept }
