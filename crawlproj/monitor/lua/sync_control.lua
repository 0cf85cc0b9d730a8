-- The sync script's control part: whether the frontier may hand out work.
--
-- The sync script (one call per partition per sync) is composed of parts, in
-- this order (crawlproj/frontier/frontier.py, SYNC_PARTS): due/lua/seen.lua,
-- this, traps/lua/sync_budgets.lua, recrawl/lua/sync_recrawl.lua,
-- frontier/lua/frontier.lua, frontier/lua/sync.lua (the main part).
--
-- Defines:
--   crawl_lost(P)     an error reply (CRAWLLOST) when the crawl's state is not
--                     on this server, else nil; the main part returns it first
--   crawl_control(P)  paused, stopped: the server ms of the crawl's pause and
--                     of its last stop, 0 = none
-- Uses nothing of the other parts. Keys (read only): P..'due', P..'control'.
--
-- Mercator's background thread decides when a crawl ends (Najork & Heydon
-- 2001, §3); here the operator does, crawl-wide: `scrapy crawlctl`
-- (crawlproj/monitor/control.py, lua/control.lua) writes pause and stop in
-- every partition's control hash, this script's only view of the flag. A
-- paused crawl is given no new lease, though expired ones still go back
-- (frontier.lua); a stop closes the workers running when it was given
-- (crawlproj/frontier/sync.py compares it with each worker's start).

-- The crawl's state must be here: a server restarted without it (no
-- persistence, or another server behind the address) would otherwise look
-- like an empty frontier, and workers would lease nothing and finish, or
-- enqueue into a crawl with no DUE. The DUE's per-partition record (written
-- when the crawl is set up, crawlproj/due/urlseen.py) marks the partition.
local function crawl_lost(P)
  if redis.call('EXISTS', P .. 'due') == 0 then
    return redis.error_reply('CRAWLLOST the crawl\'s state is not on this server (no ' ..
                             P .. 'due): it restarted without its data, or was flushed')
  end
  return nil
end

local function crawl_control(P)
  local control = redis.call('HMGET', P .. 'control', 'pause', 'stop')
  return tonumber(control[1] or 0), tonumber(control[2] or 0)
end
