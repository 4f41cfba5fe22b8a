-- Helpers for the scripts that name the objects records are written in (sent in front of
-- name_dead_letter_objects.lua and name_archive_objects.lua): the naming walk and the
-- answer are the same for both, only where names are kept differs.

-- Walks the groups in ARGV from position `first` (proposed name, n, then n entry ids of
-- `stream`). An entry `name_of(id)` knows keeps its name; the entries of a group that
-- have none and are still in the stream are given the group's proposed name with
-- `give(proposed, ids)`, unless `taken(proposed)`. Returns the set of entry ids handed
-- in and the names met, in order of first meeting.
local function name_groups(stream, first, name_of, taken, give)
  local handed, met, order = {}, {}, {}
  local function meet(name)
    if not met[name] then
      met[name] = true
      order[#order + 1] = name
    end
  end
  local i = first
  while i <= #ARGV do
    local proposed, n = ARGV[i], tonumber(ARGV[i + 1])
    local fresh = {}
    for j = i + 2, i + 1 + n do
      local id = ARGV[j]
      handed[id] = true
      local name = name_of(id)
      if name then
        meet(name)
      elseif #redis.call('XRANGE', stream, id, id) > 0 then
        fresh[#fresh + 1] = id
      end
    end
    if #fresh > 0 and not taken(proposed) then
      give(proposed, fresh)
      meet(proposed)
    end
    i = i + 2 + n
  end
  return handed, order
end

-- The answer: per name in `order`, {name, {its entry ids (`ids_of(name)`)}, {id, value,
-- ...}} where the last list holds field `field` of its entries not `handed` in that
-- are still in `stream`.
local function named_objects(stream, order, ids_of, handed, field)
  local out = {}
  for _, name in ipairs(order) do
    local ids, others = ids_of(name), {}
    for _, id in ipairs(ids) do
      if not handed[id] then
        local entry = redis.call('XRANGE', stream, id, id)[1]
        if entry then
          local fields = entry[2]
          for k = 1, #fields, 2 do
            if fields[k] == field then
              others[#others + 1] = id
              others[#others + 1] = fields[k + 1]
            end
          end
        end
      end
    end
    out[#out + 1] = {name, ids, others}
  end
  return out
end
