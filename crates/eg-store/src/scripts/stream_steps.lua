-- Helpers for scripts that work on stream entries, sent in front of them
-- (settle_steps.lua and expand_fan_out.lua; see scripts.rs).

-- Field lists of stream entries read in this call, by stream and id (false: gone).
local read_entries = {}

-- The field list of stream entry `id` (name, value, name, value, …), or nil when it is
-- gone. Read once per call: the deliveries of one batch entry settled together read its
-- bodies once, not once each. (No script here changes an entry it has read: settles
-- delete theirs at the end, with finish().)
local function entry_fields(stream, id)
  local key = stream .. ' ' .. id
  local fields = read_entries[key]
  if fields == nil then
    local entry = redis.call('XRANGE', stream, id, id)[1]
    fields = entry and entry[2] or false
    read_entries[key] = fields
  end
  return fields or nil
end

-- The event body stream entry `id` carries, or nil: for delivery `index` of a batch
-- entry (`Batch` layout) field b<index>; field b (the `Carried` and `FanOut` layouts);
-- or else what follows the first newline of its record d: a carried retry (a retry-set
-- member `record\nbody`, settle_steps.lua) that a scheduler of an earlier release
-- promoted whole into d. Records are JSON on one line, so the first newline ends the
-- record.
local function entry_body(stream, id, index)
  local fields = entry_fields(stream, id)
  if not fields then
    return nil
  end
  local own = index and ('b' .. index)
  local body, record = nil, nil
  for j = 1, #fields, 2 do
    if fields[j] == own then
      return fields[j + 1]
    elseif fields[j] == 'b' then
      body = fields[j + 1]
    elseif fields[j] == 'd' then
      record = fields[j + 1]
    end
  end
  if body then
    return body
  end
  local cut = record and string.find(record, '\n', 1, true)
  if cut then
    return string.sub(record, cut + 1)
  end
  return nil
end

-- Calls `cmd` with `head` (a table of its leading arguments), then `items`, then `tail`
-- (its trailing arguments, or nil), in chunks:
-- Lua's unpack() has a limit of a few thousand values, and a settle call may carry a
-- batch of 5,000 (pairs stay whole: a chunk is an even count). Returns the sum of the
-- integer replies and the elements of the list replies.
local function call_with_all(cmd, head, items, tail)
  local total, listed = 0, {}
  for first = 1, #items, 1000 do
    local args = { unpack(head) }
    for j = first, math.min(first + 999, #items) do
      args[#args + 1] = items[j]
    end
    for _, arg in ipairs(tail or {}) do
      args[#args + 1] = arg
    end
    local reply = redis.call(cmd, unpack(args))
    if type(reply) == 'number' then
      total = total + reply
    elseif type(reply) == 'table' then
      for _, element in ipairs(reply) do
        listed[#listed + 1] = element
      end
    end
  end
  return total, listed
end
