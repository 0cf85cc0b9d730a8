-- An operator's word on one host, in whatever state it is (frontier.lua's
-- header): URLFrontier's BlockQueueUntil and SetDelay (Frontier.block,
-- Frontier.set_delay). KEYS[1] the host's partition prefix; ARGV op ('block'
-- or 'delay'), host, ms (0: lifted). Returns the block's end (server ms) or
-- the delay; 0 when lifted.
local P, op, host, ms = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
if op == 'delay' then
  if ms <= 0 then
    redis.call('HDEL', P .. 'delays', host)
    return 0
  end
  redis.call('HSET', P .. 'delays', host, ms)
  return ms
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local BLOCKED, HEAP = P .. 'blocked', P .. 'heap'
local old = redis.call('ZSCORE', BLOCKED, host)
local till = 0
if ms > 0 then
  till = now + ms
  redis.call('ZADD', BLOCKED, till, host)
else
  redis.call('ZREM', BLOCKED, host)
end
-- a host the old block sent to the heap waits there until that block's end:
-- it waits for the new one's instead, or comes back now
if old and redis.call('ZSCORE', HEAP, host) == old then
  redis.call('ZADD', HEAP, math.max(till, now), host)
end
return till
