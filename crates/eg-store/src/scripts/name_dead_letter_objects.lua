-- Names the objects dead-letter records are written in, so every attempt at a record —
-- by any worker, in any grouping — writes it under the one name it was first given,
-- together with the same other records (see eg-deadletter's worker).
--
-- KEYS[1] dead-letter stream
-- KEYS[2] entry id -> object name (records still in the stream only)
-- KEYS[3] object name -> its entry ids still in the stream, space-separated
-- ARGV[1] the record field of a stream entry
-- ARGV[2..] one group after another: proposed name, n, then the n entry ids read for it
--
-- A record without a name gets its group's proposed name, unless that name is taken
-- (names derive from their records, so it never is; the records then stay unnamed). A
-- record no longer in the stream (finished meanwhile) gets none.
-- Returns one item per name the records have: {name, {its entry ids}, {id, record, ...}}
-- where the last list holds the records of its entries that were not handed in.
-- object_naming.lua is sent in front of this file.
local stream, names, members, field = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local handed, order = name_groups(
  stream,
  2,
  function(id)
    return redis.call('HGET', names, id)
  end,
  function(proposed)
    return redis.call('HEXISTS', members, proposed) == 1
  end,
  function(proposed, fresh)
    for _, id in ipairs(fresh) do
      redis.call('HSET', names, id, proposed)
    end
    redis.call('HSET', members, proposed, table.concat(fresh, ' '))
  end
)
local function ids_of(name)
  local ids = {}
  for id in string.gmatch(redis.call('HGET', members, name) or '', '%S+') do
    ids[#ids + 1] = id
  end
  return ids
end
return named_objects(stream, order, ids_of, handed, field)
