-- The sync script's budgets part: the trap guard's per-host limits, counted
-- crawl-wide where the URLs are queued and leased.
--
-- Composed after due/lua/seen.lua and monitor/lua/sync_control.lua, before
-- recrawl/lua/sync_recrawl.lua, frontier/lua/frontier.lua and the main part
-- frontier/lua/sync.lua (crawlproj/frontier/frontier.py, SYNC_PARTS).
--
-- Defines:
--   budgets_open(P, max_queued, max_pages)  this call's budgets (ARGV 5 and 6,
--                       host_max_queued and host_max_pages; 0 = none)
--   over_budget(host, m)  which rule refuses a new URL of host: 'queued' (it
--                       has max_queued URLs queued), 'pages' (URLs leased so far
--                       plus queued reach max_pages) or nil; m: the host's
--                       {score, fp, ...} queued by this very call, or nil
--   refused(over)       counts a URL over_budget refused (the DUE had not seen it)
--   over_queued, over_pages  this call's refusals by rule
--   count_page(host)    a URL of host was leased (counted only while
--                       max_pages is on)
--   trapped_suspect(host, score)  whether a URL of this score is a suspect of
--                       a host flagged as a trap, to be dropped, not leased
-- Uses nothing of the other parts. Keys: P..'q:<host>' (the frontier's back
-- queue, its length read), P..'hostpages' HASH host -> URLs leased, and
-- P..'trapped' (read; written by crawlproj/traps/nearhost.py).
--
-- Mercator bounds the work of one host only by its politeness (Najork &
-- Heydon 2001, §3.1: one connection per host, a wait between downloads); a
-- crawler trap, a server's unbounded space of URLs, would still fill its back
-- queue and the crawl's time. These budgets stop that at the frontier's
-- door, crawl-wide, whichever worker finds the links (crawlproj/traps/).

local max_queued, max_pages = 0, 0
local QUEUE, HOSTPAGES, TRAPPED
-- The trap guard's near-duplicate rule (crawlproj/traps/nearhost.py): a URL
-- found on a near duplicate of its host is queued with SUSPECT added to its
-- score, so it sorts behind the host's other URLs; a host in TRAPPED has its
-- suspects dropped when one of them would be leased.
local SUSPECT = 1e15
-- this call's counts per host, read once: host -> URLs queued, URLs leased
local queued_of, leased_of = {}, {}
-- this call's refusals, by rule (the reply's refused_host_queued and _pages)
local over_queued, over_pages = 0, 0

local function budgets_open(P, queued, pages)
  QUEUE, HOSTPAGES, TRAPPED = P .. 'q:', P .. 'hostpages', P .. 'trapped'
  max_queued, max_pages = queued, pages
end

-- A forced URL (a retry, a seed given again) was admitted once: the caller
-- never asks for it.
local function over_budget(host, m)
  if max_queued <= 0 and max_pages <= 0 then return nil end
  local q = queued_of[host]
  if q == nil then
    q = redis.call('ZCARD', QUEUE .. host)
    queued_of[host] = q
  end
  if m then q = q + #m / 2 end
  if max_queued > 0 and q >= max_queued then return 'queued' end
  if max_pages > 0 then
    local l = leased_of[host]
    if l == nil then
      l = tonumber(redis.call('HGET', HOSTPAGES, host) or 0)
      leased_of[host] = l
    end
    if l + q >= max_pages then return 'pages' end
  end
  return nil
end

local function refused(over)
  if over == 'queued' then over_queued = over_queued + 1 else over_pages = over_pages + 1 end
end

local function count_page(host)
  if max_pages > 0 then redis.call('HINCRBY', HOSTPAGES, host, 1) end
end

local function trapped_suspect(host, score)
  return tonumber(score) >= SUSPECT and redis.call('HEXISTS', TRAPPED, host) == 1
end
