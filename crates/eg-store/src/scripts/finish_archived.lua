-- Finishes archive backlog entries (written, dropped, or trimmed): acknowledges and
-- deletes them and forgets them in their object names' member lists, in one step, so a
-- name is kept exactly as long as an entry of it is in the backlog
-- (`name_archive_objects.lua`).
--
-- KEYS[1] the archive backlog (stream)
-- KEYS[2] object name -> its entry ids still in the backlog, space-separated
-- ARGV[1] consumer group      ARGV[2..] entry ids
-- Returns how many were still pending.
local ids, finished = {}, {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
  finished[ARGV[i]] = true
end
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('XDEL', KEYS[1], unpack(ids))

local kept = redis.call('HGETALL', KEYS[2])
for i = 1, #kept, 2 do
  local left, changed = {}, false
  for id in string.gmatch(kept[i + 1], '%S+') do
    if finished[id] then
      changed = true
    else
      left[#left + 1] = id
    end
  end
  if #left == 0 then
    redis.call('HDEL', KEYS[2], kept[i])
  elseif changed then
    redis.call('HSET', KEYS[2], kept[i], table.concat(left, ' '))
  end
end
return acked
