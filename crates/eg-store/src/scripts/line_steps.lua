-- Ordering lines (docs/ordered-delivery.md), sent in front of settle.lua (after
-- settle_steps.lua's helpers), cancel_retry.lua and sweep_lines.lua:
-- advance_line(marker, ready, subscription) moves a key's line on once its head delivery
-- reached a terminal outcome (or, in the sweep, was found lost).
--
-- A line (codec::line_member) is a list of `<delivery id>\n<record>`, head first; only
-- the head is ever in the ready stream, the retry set or the paused set. The marker
-- (codec::line_marker) is `L<delivery id>\n<line key>\n<waiting hash key>\n<line index
-- key>`; the line, the waiting hash and the index carry the caller's partition tag, so
-- the same cluster slot.
-- Only when the line's head is this very delivery is it popped and the next member's
-- record added to the ready stream `ready`: a duplicate or late settle of a delivery
-- that already left the line changes nothing, so a line never advances twice. A line
-- left empty is gone (Redis deletes an empty list) and leaves the index with it.
local function advance_line(marker, ready, subscription)
  local first = string.find(marker, '\n', 1, true)
  local second = first and string.find(marker, '\n', first + 1, true)
  if not second then
    return
  end
  local third = string.find(marker, '\n', second + 1, true)
  local id = string.sub(marker, 2, first - 1)
  local line = string.sub(marker, first + 1, second - 1)
  local head = redis.call('LINDEX', line, 0)
  if not head or string.sub(head, 1, #id + 1) ~= id .. '\n' then
    return
  end
  redis.call('LPOP', line)
  local next_member = redis.call('LINDEX', line, 0)
  if next_member then
    local cut = string.find(next_member, '\n', 1, true)
    redis.call('XADD', ready, '*', 'd', string.sub(next_member, cut + 1))
    local waiting = string.sub(marker, second + 1, (third or 0) - 1)
    if redis.call('HINCRBY', waiting, subscription, -1) <= 0 then
      redis.call('HDEL', waiting, subscription)
    end
  elseif third then
    redis.call('HDEL', string.sub(marker, third + 1), line)
  end
end
