-- Settles locks of one queue subscription in one partition (pull delivery): acknowledge
-- (done), release now (requeue: a new entry with the delivery count carried in its
-- record), release with a delay (retry: into the subscription's delayed set), reject or
-- end by count or time-to-live (deadletter, or done for a drop), renew (restart the
-- lock's idle time; the delivery counter is unchanged, so the same token stays valid).
-- settle_steps.lua is sent in front of this file and does every step but renew, with
-- settle.lua's KEYS/ARGV layout:
--
-- KEYS[1]  the queue stream    KEYS[2]  the subscription's delayed set (score = due, ms)
-- KEYS[3]  dead-letter delay sorted set    KEYS[4]  history index   KEYS[5]  queues index
-- KEYS[6]  the delivered log (unused: a queue entry never carries its body)
-- then per item the 6 keys of settle.lua (event hash, history list, archive ×3, unused)
-- ARGV[1..6] as settle.lua (ARGV[1] = `receivers`), then per item the 8 ARGV of
-- settle.lua (a queue entry never carries its body), with one more action: renew.
-- After the items (N = ARGV[6], base c = 6 + 8 * N):
-- ARGV[c+1]  the lock duration, ms
-- ARGV[c+2]  check: held (the lock must still be held: idle < duration) or expired
--            (the scheduler's sweep: idle >= duration, nobody holds it)
-- ARGV[c+2+i]  item i's delivery counter as its token says
--
-- An item is settled only if its entry is pending with exactly that counter and passes
-- the check; otherwise nothing changes for it and its result is 0 (Event Grid's
-- TokenLost): a token goes stale the moment its event is delivered again.
local c = 6 + 8 * n
local lock_ms = tonumber(ARGV[c + 1])
local check = ARGV[c + 2]

local function holds(id, want)
  local pending = redis.call('XPENDING', KEYS[1], group, id, id, 1)
  local entry = pending[1]
  if not entry or tonumber(entry[4]) ~= want then
    return false
  end
  local idle = tonumber(entry[3])
  if check == 'expired' then
    return idle >= lock_ms
  end
  return idle < lock_ms
end

local results = {}
-- A lock token given twice in one call settles once: after it is settled, its lock is
-- ended for the rest of the call (renewing it too).
local settled_here = {}
for i = 1, n do
  local k, a = 6 + 6 * (i - 1), 6 + 8 * (i - 1)
  local id = ARGV[a + 1]
  if settled_here[id] or not holds(id, tonumber(ARGV[c + 2 + i])) then
    results[i] = 0
  elseif ARGV[a + 2] == 'renew' then
    redis.call('XCLAIM', KEYS[1], group, 'locks', 0, id, 'IDLE', 0, 'JUSTID')
    results[i] = 1
  else
    results[i] = settle(k, a, nil)
    to_acknowledge[#to_acknowledge + 1] = id
    settled_here[id] = true
  end
end
-- The locks of the settled items end together, with one XACK.
finish()
return results
