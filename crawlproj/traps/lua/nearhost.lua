-- The trap guard's near-duplicate test of one page against its host's recent
-- pages (crawlproj/traps/nearhost.py). One call per page, atomic, so workers
-- that fetch pages of one host in turn all count into one window.
--
-- KEYS[1]  th:<host>  STRING the host's last `window` pages, newest first,
--                     9 bytes each: the simhash (two big-endian 32-bit
--                     halves) and 1 if that page was a near duplicate
-- KEYS[2]  trapped    HASH   hosts with more than `budget` near duplicates
--                     among their last `window` pages: the frontier drops
--                     their queued suspects (frontier/lua/sync.lua)
-- KEYS[3]  due        the partition's DUE record: the crawl's state is on this
--                     server (a server that came back empty must not get keys)
-- ARGV     the page's simhash as two unsigned 32-bit halves (hi, lo), window,
--          k (a near duplicate is within k bits of a recent page), budget, host
-- Returns  {near (0 or 1), near duplicates among the host's last `window`
--          pages, this one included}

if redis.call('EXISTS', KEYS[3]) == 0 then
  return redis.error_reply("CRAWLLOST the crawl's state is not on this server (no " .. KEYS[3] ..
                           "): it restarted without its data, or was flushed")
end
local hi, lo = tonumber(ARGV[1]), tonumber(ARGV[2])
local window, k, budget, host = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local SIZE = 9

local function popcount(x)
  local n = 0
  while x ~= 0 do
    x = bit.band(x, x - 1)
    n = n + 1
  end
  return n
end

local recent = redis.call('GET', KEYS[1]) or ''
local near, count = 0, 0
local keep = (window - 1) * SIZE
for pos = 1, #recent - SIZE + 1, SIZE do
  local h, l, flag = struct.unpack('>I4I4B', recent, pos)
  if near == 0 and popcount(bit.bxor(h, hi)) + popcount(bit.bxor(l, lo)) <= k then
    near = 1
  end
  if pos <= keep then count = count + flag end
end
redis.call('SET', KEYS[1], struct.pack('>I4I4B', hi, lo, near) .. string.sub(recent, 1, keep))
count = count + near
if count > budget then
  redis.call('HSET', KEYS[2], host, count)
else
  redis.call('HDEL', KEYS[2], host)
end
return {near, count}
