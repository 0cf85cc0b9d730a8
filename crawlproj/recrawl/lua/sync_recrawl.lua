-- The sync script's recrawl part: continuous crawling's side of the frontier,
-- the recrawl queues, the budget and the share of never-crawled URLs.
--
-- Composed after due/lua/seen.lua, monitor/lua/sync_control.lua and
-- traps/lua/sync_budgets.lua, before frontier/lua/frontier.lua and the main
-- part frontier/lua/sync.lua (crawlproj/frontier/frontier.py, SYNC_PARTS).
--
-- WebFountain keeps, per site, one queue of URLs never crawled and one of URLs
-- to recrawl (Edwards et al. 2001, §3), and spends a fixed number of fetches
-- per unit of time (§4, constraint (1)). Keys of the partition P:
--   d:<host> ZSET fingerprint -> due time (ms): the host's recrawl queue, pages
--           fetched before and due again; their payloads are in the frontier's
--           p:<host> (a fingerprint is in one of q:<host> and d:<host> at most)
--   rready  ZSET host -> due time of its earliest due recrawl: a host state,
--           beside the frontier's ready (frontier.lua moves hosts in and out)
--   rbuckets HASH change-rate bucket -> pages scheduled in it
--           (crawlproj/recrawl/schedule.py plans from these counts)
--   budget  HASH t, at: the token bucket; sn, so: recent leases of
--           never-crawled URLs and of recrawls
--
-- Defines:
--   recrawl_open(P, now, budget, burst, new_share)  this call's view (ARGV 7-9:
--                 fetches per second for this partition, 0 = none; the token
--                 bucket's depth; the share of never-crawled URLs)
--   RREADY, dues(host)   the keys above
--   recrawl_enter(host, fp, due)  fp enters d:<host> (counted in scheduled_delta)
--   recrawl_has(host, fp), recrawl_head(host), recrawl_pop(host)  d:<host> reads
--   recrawl_leased()     a recrawl was leased (scheduled_delta, leased_recrawl)
--   rbuckets_move(old, new)  a page left bucket old and entered new (-1: none)
--   recrawl_turn(n_new, n_old)  whether the next lease is a recrawl, given the
--                 hosts ready with each kind
--   count_kind(recrawl)  the lease's kind counted in the share's window
--   bucket_fill(), bucket_empty(), bucket_take(), bucket_starved(waiting),
--   bucket_close(), bucket_next(next_ready)  the token bucket (below)
--   scheduled_delta, leased_recrawl, budget_waits  this call's counts
-- Uses nothing of the other parts; frontier.lua moves hosts between states.

-- leases over which the share of never-crawled URLs is held (halved past it)
local SHARE_WINDOW = 100
local RREADY, RBUCKETS, BUDGET, DUES
local rnow, budget, burst, new_share = 0, 0, 0, 0
local tokens, starved = 0, false
local scheduled_delta, leased_recrawl, budget_waits = 0, 0, 0

local function recrawl_open(P, now_ms, per_second, depth, share)
  RREADY, RBUCKETS, BUDGET, DUES = P .. 'rready', P .. 'rbuckets', P .. 'budget', P .. 'd:'
  rnow, budget, burst, new_share = now_ms, per_second, depth, share
end

local function dues(host) return DUES .. host end

-- A URL enters its host's recrawl queue, due at time due.
local function recrawl_enter(host, fp, due)
  if redis.call('ZADD', dues(host), due, fp) == 1 then scheduled_delta = scheduled_delta + 1 end
end

local function recrawl_has(host, fp) return redis.call('ZSCORE', dues(host), fp) end

local function recrawl_head(host) return redis.call('ZRANGE', dues(host), 0, 0, 'WITHSCORES') end

local function recrawl_pop(host) return redis.call('ZPOPMIN', dues(host)) end

local function recrawl_leased()
  scheduled_delta = scheduled_delta - 1
  leased_recrawl = leased_recrawl + 1
end

local function rbuckets_move(old, new)
  if new >= 0 then redis.call('HINCRBY', RBUCKETS, new, 1) end
  if old >= 0 then redis.call('HINCRBY', RBUCKETS, old, -1) end
end

-- The budget [WebFountain §4, constraint (1)]: a token bucket of the crawl's
-- fetches per second (this partition's part), refilled by the server's clock,
-- so that it is spent alike by one worker or many.
local function bucket_fill()
  if budget > 0 then
    local b = redis.call('HMGET', BUDGET, 't', 'at')
    tokens = tonumber(b[1] or burst)
    local at = tonumber(b[2] or rnow)
    tokens = math.min(burst, tokens + math.max(0, rnow - at) * budget / 1000)
  end
end

local function bucket_empty() return budget > 0 and tokens < 1 end

local function bucket_take() tokens = tokens - 1 end

-- the bucket ran out while hosts were ready (waiting): they wait for a token
local function bucket_starved(waiting) starved = waiting end

local function bucket_close()
  if budget > 0 then
    redis.call('HSET', BUDGET, 't', tostring(tokens), 'at', rnow)
    if starved then budget_waits = 1 end
  end
end

-- the time ready hosts may next be served: the budget's next token when they
-- wait for it
local function bucket_next(next_ready)
  if starved then return rnow + math.ceil((1 - tokens) * 1000 / budget) end
  return next_ready
end

-- Whether the next lease is a recrawl: the kind whose share of the recent
-- leases is under its due (new_share), when both wait. The shares are the
-- budget hash's sn and so, both halved past SHARE_WINDOW: counted since the
-- crawl's start, a first pass that took every lease gave the recrawls every
-- contested lease for as long again, while the never-crawled URLs waited.
local function recrawl_turn(n_new, n_old)
  local recrawl = n_new == 0
  if n_new > 0 and n_old > 0 then
    local counts = redis.call('HMGET', BUDGET, 'sn', 'so')
    local ln, lr = tonumber(counts[1] or 0), tonumber(counts[2] or 0)
    recrawl = ln >= new_share * (ln + lr + 1)
  end
  return recrawl
end

local function count_kind(recrawl)
  redis.call('HINCRBY', BUDGET, recrawl and 'so' or 'sn', 1)
  local window = redis.call('HMGET', BUDGET, 'sn', 'so')
  local wn, wo = tonumber(window[1] or 0), tonumber(window[2] or 0)
  if wn + wo > SHARE_WINDOW then
    redis.call('HSET', BUDGET, 'sn', math.floor(wn / 2), 'so', math.floor(wo / 2))
  end
end
