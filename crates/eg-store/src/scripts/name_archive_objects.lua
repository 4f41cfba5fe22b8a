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
-- object_naming.lua is sent in front of this file.
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

local handed, order = name_groups(
  stream,
  1,
  function(id)
    return name_of[id]
  end,
  function(proposed)
    return ids_of[proposed] ~= nil
  end,
  function(proposed, fresh)
    redis.call('HSET', members, proposed, table.concat(fresh, ' '))
    ids_of[proposed] = fresh
  end
)
return named_objects(stream, order, function(name)
  return ids_of[name]
end, handed, 'b')
