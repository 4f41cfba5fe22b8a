-- Names the objects the topic archive's backlog entries are written in, so every attempt
-- at an entry, by any writer, in any batch, writes it under the name it was first given,
-- with the same other entries (eg-deadletter's archive writer). As `name_objects.lua`
-- does for dead letters, but kept per name only: a backlog entry is read with a thousand
-- others, so one hash field per entry would cost more Redis than the entries' own append.
--
-- KEYS[1] the archive backlog (stream)
-- KEYS[2] object name -> its entry ids still in the backlog, space-separated
-- ARGV[1..] one group after another: proposed name, n, then the n entry ids read for it
--
-- Only the names of entries being written are kept (a batch's worth per writer), so the
-- whole hash is read to find an entry's name. An entry without a name gets its group's
-- proposed name, unless that name is taken (names derive from their entries, so it never
-- is; the entries then stay unnamed). An entry no longer in the backlog gets none.
-- Returns one item per name the entries have: {name, {its entry ids}, {id, body, ...}}
-- where the last list holds the entries of the name that were not handed in.
local stream, members = KEYS[1], KEYS[2]
local name_of, ids_of = {}, {}
local kept = redis.call('HGETALL', members)
for i = 1, #kept, 2 do
  local ids = {}
  for id in string.gmatch(kept[i + 1], '%S+') do
    ids[#ids + 1] = id
    name_of[id] = kept[i]
  end
  ids_of[kept[i]] = ids
end

local handed, met, order = {}, {}, {}
local function meet(name)
  if not met[name] then
    met[name] = true
    order[#order + 1] = name
  end
end

local i = 1
while i <= #ARGV do
  local proposed, n = ARGV[i], tonumber(ARGV[i + 1])
  local fresh = {}
  for j = i + 2, i + 1 + n do
    local id = ARGV[j]
    handed[id] = true
    local name = name_of[id]
    if name then
      meet(name)
    elseif #redis.call('XRANGE', stream, id, id) > 0 then
      fresh[#fresh + 1] = id
    end
  end
  if #fresh > 0 and not ids_of[proposed] then
    redis.call('HSET', members, proposed, table.concat(fresh, ' '))
    ids_of[proposed] = fresh
    meet(proposed)
  end
  i = i + 2 + n
end

local out = {}
for _, name in ipairs(order) do
  local others = {}
  for _, id in ipairs(ids_of[name]) do
    if not handed[id] then
      local entry = redis.call('XRANGE', stream, id, id)[1]
      if entry then
        local fields = entry[2]
        for k = 1, #fields, 2 do
          if fields[k] == 'b' then
            others[#others + 1] = id
            others[#others + 1] = fields[k + 1]
          end
        end
      end
    end
  end
  out[#out + 1] = {name, ids_of[name], others}
end
return out
