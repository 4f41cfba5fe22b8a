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
local stream, names, members, field = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local handed, met, order = {}, {}, {}
local function meet(name)
  if not met[name] then
    met[name] = true
    order[#order + 1] = name
  end
end

local i = 2
while i <= #ARGV do
  local proposed, n = ARGV[i], tonumber(ARGV[i + 1])
  local fresh = {}
  for j = i + 2, i + 1 + n do
    local id = ARGV[j]
    handed[id] = true
    local name = redis.call('HGET', names, id)
    if name then
      meet(name)
    elseif #redis.call('XRANGE', stream, id, id) > 0 then
      fresh[#fresh + 1] = id
    end
  end
  if #fresh > 0 and redis.call('HEXISTS', members, proposed) == 0 then
    for _, id in ipairs(fresh) do
      redis.call('HSET', names, id, proposed)
    end
    redis.call('HSET', members, proposed, table.concat(fresh, ' '))
    meet(proposed)
  end
  i = i + 2 + n
end

local out = {}
for _, name in ipairs(order) do
  local ids, others = {}, {}
  for id in string.gmatch(redis.call('HGET', members, name) or '', '%S+') do
    ids[#ids + 1] = id
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
