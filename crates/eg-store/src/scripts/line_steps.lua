-- Ordering lines (docs/ordered-delivery.md), sent in front of settle.lua (after
-- settle_steps.lua's helpers) and cancel_retry.lua: advance_line(marker, ready, subscription)
-- moves a key's line on once its head delivery reached a terminal outcome.
--
-- A line (codec::line_member) is a list of `<delivery id>\n<record>`, head first; only
-- the head is ever in the ready stream, the retry set or the paused set. The marker
-- (codec::line_marker) is `L<delivery id>\n<line key>\n<waiting hash key>`; the line and
-- the waiting hash carry the caller's partition tag, so the same cluster slot.
-- Only when the line's head is this very delivery is it popped and the next member's
-- record added to the ready stream `ready`: a duplicate or late settle of a delivery
-- that already left the line changes nothing, so a line never advances twice.
local function advance_line(marker, ready, subscription)
  local first = string.find(marker, '\n', 1, true)
  local second = first and string.find(marker, '\n', first + 1, true)
  if not second then
    return
  end
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
    local waiting = string.sub(marker, second + 1)
    if redis.call('HINCRBY', waiting, subscription, -1) <= 0 then
      redis.call('HDEL', waiting, subscription)
    end
  end
end
