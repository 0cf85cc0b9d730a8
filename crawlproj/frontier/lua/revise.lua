-- Revise scheduled pages of ONE host: a page known to have changed since its
-- last fetch gets the recrawl record the worker made for it, and is due now
-- unless the worker says it is not worth a fetch.
--
-- What tells it: a sitemap's <lastmod> past the page's last fetch
-- (crawlproj/sitemaps/lastmod.py; WebFountain §4 keeps a page's change
-- history in its metadata, and a change the site reports is one more
-- observation of it). The worker read the page's payload, counted the change
-- in its state and sends the old and the new payload: a page leased or
-- rescheduled meanwhile has another payload and is left as it is, so a
-- revision racing with the crawl never undoes a fetch.
--
-- KEYS[1]  the partition's key prefix, e.g. "cp:{crawl/3}:"
-- ARGV     host, then per page: fingerprint, payload read, new payload,
--          old bucket, new bucket (its change-rate bucket before and after,
--          counted in rbuckets as sync.lua counts them), due now ('1' or '0':
--          the plan gives the page's bucket nothing, its due time stays)
-- Returns  the number of pages revised
--
-- The host's state (sync.lua's heap, ready, rready, leases, idle): a host
-- waiting on the heap for a later recrawl only (no never-crawled URL queued)
-- now waits for its politeness time alone, kept in idle; a ready host gets
-- its due recrawl in rready; a leased host looks at its recrawl queue when
-- it is released; a host in rready already pops its earliest due page.

local P = KEYS[1]
local host = ARGV[1]
local dues, payloads = P .. 'd:' .. host, P .. 'p:' .. host
local HEAP, READY, RREADY, IDLE = P .. 'heap', P .. 'ready', P .. 'rready', P .. 'idle'
local RBUCKETS = P .. 'rbuckets'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local revised, hastened = 0, 0
for i = 2, #ARGV, 6 do
  local fp = ARGV[i]
  if redis.call('ZSCORE', dues, fp) and redis.call('HGET', payloads, fp) == ARGV[i + 1] then
    redis.call('HSET', payloads, fp, ARGV[i + 2])
    if ARGV[i + 5] == '1' then
      redis.call('ZADD', dues, 'XX', 'LT', now, fp)
      hastened = hastened + 1
    end
    local old, new = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
    if old ~= new then
      if new >= 0 then redis.call('HINCRBY', RBUCKETS, new, 1) end
      if old >= 0 then redis.call('HINCRBY', RBUCKETS, old, -1) end
    end
    revised = revised + 1
  end
end

if hastened > 0 and not redis.call('ZSCORE', RREADY, host) then
  if redis.call('ZSCORE', READY, host) then
    redis.call('ZADD', RREADY, now, host)
  elseif redis.call('ZSCORE', HEAP, host) and redis.call('EXISTS', P .. 'q:' .. host) == 0 then
    local polite = redis.call('ZSCORE', IDLE, host)
    if polite then
      redis.call('ZADD', HEAP, 'LT', math.max(now, tonumber(polite)), host)
    end
  end
end
return revised
