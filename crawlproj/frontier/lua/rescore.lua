-- Rewrite the priorities of queued URLs of ONE partition in bulk.
--
-- The ranker (Cho et al. §3: IR'(P) recomputed on the graph seen so far) gives
-- every queued URL a new score now and then. The worker read the queues, scored
-- them, and sends here only the changes. ZADD XX updates members that are still
-- queued and never re-adds one that a worker leased meanwhile, so a rescore
-- racing with the crawl neither loses nor duplicates a URL. A ready host's score
-- in the ready set is its best URL's (see sync.lua), so it is refreshed too;
-- hosts on the heap or leased read their best URL when they next become ready.
--
-- KEYS[1]  the partition's key prefix, e.g. "cp:{crawl/3}:"
-- ARGV     groups of: host, n, then n pairs of score, fingerprint (queue member)
-- Returns  the number of queued URLs whose score changed

local P = KEYS[1]
local READY = P .. 'ready'
local changed = 0
local i = 1
while i <= #ARGV do
  local host, n = ARGV[i], tonumber(ARGV[i + 1])
  local q = P .. 'q:' .. host
  local first, last = i + 2, i + 1 + 2 * n
  i = last + 1
  if n > 0 then
    -- unpack() is bounded by Lua's C stack: write in slices of 2000 pairs
    for s = first, last, 4000 do
      local e = math.min(s + 3999, last)
      changed = changed + redis.call('ZADD', q, 'XX', 'CH', unpack(ARGV, s, e))
    end
    if redis.call('ZSCORE', READY, host) then
      local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
      if head[2] then redis.call('ZADD', READY, 'XX', head[2], host) end
    end
  end
end
return changed
