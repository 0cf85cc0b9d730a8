-- The sync script's frontier part: Mercator's polite, prioritising frontier
-- (Najork & Heydon 2001, §3.1), kept in Redis so that every worker of a crawl
-- shares it: host states, back queues, leases and their releases.
--
-- Composed after due/lua/seen.lua, monitor/lua/sync_control.lua,
-- traps/lua/sync_budgets.lua and recrawl/lua/sync_recrawl.lua, before the
-- main part frontier/lua/sync.lua (crawlproj/frontier/frontier.py,
-- SYNC_PARTS), which calls the sections below in order.
--
-- A host is always in exactly one of these states, each a key of the partition:
--   heap    ZSET host -> time (ms) it may next be contacted; it has queued URLs.
--           This is Mercator's heap of back queues keyed by next-contact time.
--   ready   ZSET host -> score of its best queued URL; its time has come.
--           Serving ZPOPMIN of ready gives the best URL among ready hosts.
--   rready  (the recrawl part's) its earliest due recrawl's time has come
--   leases  ZSET host -> lease deadline (ms); one of its URLs is being fetched
--           by some worker (weak politeness: one connection per host).
--   idle    ZSET host -> next-contact time (ms); no queued URL, not leased. Kept
--           until that time passes so a refilled queue still waits its turn.
--           A host on the heap with no new URL, waiting for a recrawl's due
--           time, is also here: its politeness time, for a new URL that comes.
-- A host's lease ends when its download ends, but the URL's does not: until the
-- worker has committed the page's links, the URL stays leased by itself, so
-- that a worker dying mid-page loses nothing while the host is already back on
-- the heap (its politeness delay runs from the end of the download):
--   pending ZSET token -> lease deadline (ms); pend HASH token -> the lease.
-- An operator's word on a host (crawlproj/frontier/hostctl.lua), in any state:
--   blocked ZSET host -> time (ms) before which it is not leased (URLFrontier's
--           BlockQueueUntil): a host popped ready before then waits on the heap.
--   delays  HASH host -> its least politeness delay (ms), whatever the worker
--           asks at a release (URLFrontier's SetDelay).
-- and per host:
--   q:<host> ZSET fingerprint -> score (lower = sooner): the host's back queue.
--   p:<host> HASH fingerprint -> payload: the queued requests themselves (of
--           q:<host> and of the recrawl part's d:<host>).
-- Keying the queue by fingerprint lets a URL be found again when another link
-- to it is seen (its score may improve: backlink counts, OPIC cash) and lets
-- the ranker rewrite scores without moving payloads (rescore.lua). Also:
--   lease HASH host -> its lease; fails HASH host -> failures in a row;
--   stats HASH counters; hosts SET hosts seen (host-first orders only);
--   hs HASH host -> its record for the operator (note(), below).
--
-- Defines:
--   frontier_open(P, now, ttl, backoff_base, backoff_max, backoff_after)
--   HEAP, READY, LEASES, IDLE, PENDING, STATS, FAILS  keys the main part counts
--   enqueue(E)   section 1: the DUE test, then the hosts' back queues
--   release(host, token, host_fate, url_fate, delay_ms, wait_ms, due_ms,
--           payload, old_bucket, new_bucket)  section 2, one release
--   renew(host, token)  section 3, one renewal: false when the lease is lost
--   lease(asked, want)  section 4: expired leases back, due hosts ready, then
--                up to want hosts leased; the flat {host, token, score,
--                payload, kind, ...} of the reply
--   tally()      the counters written; queued, scheduled, next_ready_ms
--   added, dups, bumped, stale, expired, suspects  this call's counts
-- Uses: due_test_and_set, due_test (due/lua/seen.lua); over_budget, refused,
-- count_page, trapped_suspect (traps/lua/sync_budgets.lua); RREADY, dues,
-- recrawl_enter, recrawl_has, recrawl_head, recrawl_pop, recrawl_leased,
-- rbuckets_move, recrawl_turn, count_kind and the bucket_* functions
-- (recrawl/lua/sync_recrawl.lua).
--
-- All times come from the server's clock (TIME), so workers on many machines
-- never compare their own clocks. A token names one lease for the crawl's
-- life: a counter, and the server's time, so that a counter rewound by a
-- crash (the AOF's last second lost) never hands a stale worker's token to a
-- new holder.

local P, HEAP, READY, LEASES, LEASE, IDLE, FAILS, STATS, PENDING, PEND, HOSTREC, HOSTS
local BLOCKED, DELAYS
local now, ttl, backoff_base, backoff_max, backoff_after = 0, 0, 0, 0, 0
local queued_delta = 0
local added, dups, stale, expired, bumped, suspects = 0, 0, 0, 0, 0, 0

local function frontier_open(prefix, now_ms, ttl_ms, base, max, after)
  P = prefix
  HEAP, READY, LEASES, LEASE = P .. 'heap', P .. 'ready', P .. 'leases', P .. 'lease'
  IDLE, FAILS, STATS = P .. 'idle', P .. 'fails', P .. 'stats'
  PENDING, PEND = P .. 'pending', P .. 'pend'
  HOSTREC = P .. 'hs'
  HOSTS = P .. 'hosts'  -- hosts seen, kept only for host-first orders
  BLOCKED, DELAYS = P .. 'blocked', P .. 'delays'
  now, ttl, backoff_base, backoff_max, backoff_after = now_ms, ttl_ms, base, max, after
end

local function queue(host) return P .. 'q:' .. host end
local function payloads(host) return P .. 'p:' .. host end

-- A host has a queued URL of this score: a ready host takes it as its score if
-- better; one on the heap or leased stays there (a leased host's release
-- looks at its queue); any other goes on the heap, at the time its politeness
-- delay ends (remembered in idle) or now. The states are exclusive, so the
-- commonest ones are asked first and the first hit ends it.
local function offer(host, score)
  if redis.call('ZSCORE', READY, host) then
    redis.call('ZADD', READY, 'LT', score, host)
    return
  end
  if redis.call('ZSCORE', RREADY, host) then  -- its time has come already
    redis.call('ZADD', READY, score, host)
    return
  end
  if redis.call('ZSCORE', LEASES, host) then return end
  local at = tonumber(redis.call('ZSCORE', IDLE, host) or 0)
  if redis.call('ZSCORE', HEAP, host) then
    -- on the heap for a recrawl due later: a new URL waits for politeness only
    if at > 0 then
      redis.call('ZREM', IDLE, host)
      redis.call('ZADD', HEAP, 'LT', math.max(at, now), host)
    end
    return
  end
  if at > 0 then redis.call('ZREM', IDLE, host) end
  if at < now then at = now end
  redis.call('ZADD', HEAP, at, host)
end

-- A host has a recrawl due at time due: it waits on the heap for the later of
-- that and its politeness time (kept in idle meanwhile), unless it is ready
-- or leased already (a leased host's release looks at its recrawl queue).
local function offer_due(host, due)
  if redis.call('ZSCORE', LEASES, host) then return end
  if redis.call('ZSCORE', RREADY, host) then
    redis.call('ZADD', RREADY, 'LT', due, host)
    return
  end
  if redis.call('ZSCORE', READY, host) then
    if due <= now then redis.call('ZADD', RREADY, due, host) end
    return
  end
  local polite = tonumber(redis.call('ZSCORE', IDLE, host) or 0)
  if redis.call('ZSCORE', HEAP, host) then
    if redis.call('EXISTS', queue(host)) == 0 then
      redis.call('ZADD', HEAP, 'LT', math.max(due, polite), host)
    end
    return
  end
  if polite < now then polite = now end
  redis.call('ZADD', IDLE, polite, host)
  redis.call('ZADD', HEAP, math.max(due, polite), host)
end

-- A URL enters its host's recrawl queue, due at time due.
local function schedule(host, fp, due, payload)
  recrawl_enter(host, fp, due)
  redis.call('HSET', payloads(host), fp, payload)
  offer_due(host, due)
end

-- Give a leased URL back to its queue (worker gone or shutting down): a
-- never-crawled URL to its host's queue, a recrawl to its recrawl queue at
-- its due time (its score). A lease is {token, score, payload, fingerprint,
-- kind}; pending ones are {token, score, payload, fingerprint, host, kind}.
local function requeue(host, l, kind)
  if kind == 'r' then
    -- (not beside a retry of it queued meanwhile: one payload per fingerprint)
    if not (recrawl_has(host, l[4]) or redis.call('ZSCORE', queue(host), l[4])) then
      schedule(host, l[4], tonumber(l[2]), l[3])
    end
    return
  end
  if redis.call('ZADD', queue(host), 'NX', l[2], l[4]) == 1 then
    redis.call('HSET', payloads(host), l[4], l[3])
    queued_delta = queued_delta + 1
  end
end

-- A pending URL (its host already released) goes back to its host's queue;
-- the host, in whatever state, must then offer it.
local function requeue_pending(token, lease)
  local l = cmsgpack.unpack(lease)
  requeue(l[5], l, l[6])
  redis.call('HDEL', PEND, token)
  redis.call('ZREM', PENDING, token)
  if l[6] ~= 'r' then offer(l[5], tonumber(l[2])) end
end

-- The URL of lease l stays leased by itself (pending) until its page is done.
local function to_pending(host, l)
  redis.call('HSET', PEND, l[1], cmsgpack.pack({l[1], l[2], l[3], l[4], host, l[5] or 'n'}))
  redis.call('ZADD', PENDING, now + ttl, l[1])
end

-- The host leaves its lease; it may be contacted again after delay_ms: at
-- once on the heap with a never-crawled URL queued, else at its first
-- recrawl's due time if later, else idle.
local function unlease(host, delay_ms)
  redis.call('HDEL', LEASE, host)
  redis.call('ZREM', LEASES, host)
  local at = now + delay_ms
  if redis.call('ZCARD', queue(host)) > 0 then
    redis.call('ZREM', IDLE, host)  -- no politeness time of an earlier turn stays
    redis.call('ZADD', HEAP, at, host)
    return
  end
  local head = recrawl_head(host)
  if head[2] then
    redis.call('ZADD', IDLE, at, host)
    redis.call('ZADD', HEAP, math.max(at, tonumber(head[2])), host)
  elseif delay_ms > 0 then
    redis.call('ZADD', IDLE, at, host)
  end
end

-- The host's record for the operator (crawlproj/monitor/hosts.py): how its
-- downloads ended and why it waits, as Heritrix's hosts report keeps per host.
-- {ok, fail, busy, first_ms, last_ms, last_fate, delay_ms, block_ms, wait_ms,
--  backoffs, backoff_at_ms, backoff_ms, backoff_fate}: download ends by fate;
-- the first and the last; the last one's fate, politeness delay (the
-- worker's: Crawl-delay included), backoff block and Retry-After (-1: none);
-- the backoffs so far, and the last one's start, length and fate.
local function note(host, fate, polite, block, wait)
  local old = redis.call('HGET', HOSTREC, host)
  local r = old and cmsgpack.unpack(old) or {0, 0, 0, now, now, '', 0, 0, -1, 0, 0, 0, ''}
  if fate == 'ok' then r[1] = r[1] + 1 elseif fate == 'fail' then r[2] = r[2] + 1
  elseif fate == 'busy' then r[3] = r[3] + 1 end
  r[5], r[6], r[7], r[8], r[9] = now, fate, polite, block, wait
  if block > 0 then
    r[10], r[11], r[12], r[13] = r[10] + 1, now, block, fate
  end
  redis.call('HSET', HOSTREC, host, cmsgpack.pack(r))
end

-- 1. enqueue: the DUE test-and-set, then the host's back queue. E is the
--    flat list of 8 fields per URL (frontier/lua/sync.lua's header). New URLs
--    are gathered per host and written with one ZADD and one HSET per host:
--    most of a page's new links share its host, and each command is a call
--    here and a record in the AOF.
local function enqueue(E)
  local touched = {}
  -- host -> {score, fp, ...} and host -> {fp, payload, ...}; fp -> index of its
  -- score in its host's members (a fingerprint names one URL, so one host)
  local members, fields, at_of = {}, {}, {}
  for e = 1, #E, 8 do
    local host, fp, aux, score, payload, force, bump, first =
      E[e], E[e + 1], E[e + 2], E[e + 3], E[e + 4], E[e + 5], E[e + 6], E[e + 7]
    local best = nil
    -- the trap guard's budgets: a forced URL (a retry, a seed given again)
    -- was admitted once, never refused
    local over = force ~= '1' and not at_of[fp] and over_budget(host, members[host])
    local new, refusal = false, false
    if over then
      -- tested without being marked seen: a link found again once the host's
      -- queue has room is admitted then
      refusal = due_test(P, fp, aux)
      if refusal then refused(over) end
    else
      new = due_test_and_set(P, fp, aux)  -- crawlproj/due/lua/seen.lua
    end
    local at = at_of[fp]  -- queued by this very call (then it is not new)
    if refusal then
      -- refused by a budget: neither queued nor a duplicate
    elseif not at and (new or force == '1') then
      if first ~= '' and redis.call('SADD', HOSTS, host) == 1 then score = first end
      -- a forced URL (a retry) may still be queued, or scheduled for recrawl:
      -- it keeps its place
      if new or not (redis.call('ZSCORE', queue(host), fp) or recrawl_has(host, fp)) then
        local m, f = members[host], fields[host]
        if not m then
          m, f = {}, {}
          members[host], fields[host] = m, f
        end
        best = tonumber(score)
        m[#m + 1] = best
        m[#m + 1] = fp
        at_of[fp] = #m - 1
        f[#f + 1] = fp
        f[#f + 1] = payload
        queued_delta = queued_delta + 1
        added = added + 1
      end
    else
      dups = dups + 1
      if string.byte(bump) == 60 then
        -- '<' score: the URL takes this score if lower than its own (the best
        -- of its links), never a higher one
        local v = tonumber(string.sub(bump, 2))
        if at then
          local m = members[host]
          if v < m[at] then
            m[at] = v
            bumped = bumped + 1
            best = v
          end
        elseif redis.call('ZADD', queue(host), 'XX', 'LT', 'CH', v, fp) == 1 then
          -- XX: only a URL still queued moves; one being fetched or done does not
          bumped = bumped + 1
          best = v
        end
      elseif bump ~= '0' then
        if at then
          local m = members[host]
          m[at] = m[at] + tonumber(bump)
          bumped = bumped + 1
          best = m[at]
        else
          -- XX: only a URL still queued gains; one being fetched or done does not
          local sc = redis.call('ZADD', queue(host), 'XX', 'INCR', bump, fp)
          if sc then
            bumped = bumped + 1
            best = tonumber(sc)
          end
        end
      end
    end
    if best and (touched[host] == nil or best < touched[host]) then touched[host] = best end
  end
  for host, m in pairs(members) do
    local f = fields[host]
    for j = 1, #m, 4000 do  -- unpack() is bounded by Lua's C stack
      redis.call('ZADD', queue(host), unpack(m, j, math.min(j + 3999, #m)))
      redis.call('HSET', payloads(host), unpack(f, j, math.min(j + 3999, #f)))
    end
  end
  for host, best in pairs(touched) do offer(host, best) end
end

-- 2. release: the download ended; schedule the host's next contact
--    (strong politeness, Mercator §3.1; backoff for failing hosts), and end,
--    keep or give back the URL. The fates are frontier/lua/sync.lua's header.
local function release(host, token, host_fate, url_fate, delay, wait, due_ms, rpayload,
                       old_bucket, new_bucket)
  local lease = redis.call('HGET', LEASE, host)
  local mine = lease and cmsgpack.unpack(lease)
  if mine and mine[1] ~= token then mine = nil end
  -- the URL: in the host's lease (mine) or pending by itself
  local found = true
  if url_fate == 'pending' then
    if mine then
      to_pending(host, mine)
    else
      found = redis.call('ZSCORE', PENDING, token) ~= false
    end
  elseif url_fate == 'done' or url_fate == 'recrawl' then
    -- a URL no longer pending nor in the host's lease expired meanwhile and
    -- went back to its queue: it is not scheduled a second time
    local l, kind = nil, nil
    if mine then
      l, kind = mine, mine[5]
    else
      local held = redis.call('HGET', PEND, token)
      if held then
        l = cmsgpack.unpack(held)
        kind = l[6]
        redis.call('HDEL', PEND, token)
        redis.call('ZREM', PENDING, token)
      end
    end
    if l and url_fate == 'recrawl' and redis.call('ZSCORE', queue(host), l[4]) then
      -- a retry of the page is queued (a forced enqueue while it was leased):
      -- that fetch is still to come and schedules the page when it ends; one
      -- fingerprint in both queues would share one payload
      rbuckets_move(old_bucket, -1)
    elseif l and url_fate == 'recrawl' and not (kind ~= 'r' and recrawl_has(host, l[4])) then
      -- (a never-crawled URL fetched again by a retry while already scheduled
      -- keeps the schedule it has)
      schedule(host, l[4], now + due_ms, rpayload)
      rbuckets_move(old_bucket, new_bucket)
    elseif l and url_fate == 'done' and old_bucket >= 0 then
      rbuckets_move(old_bucket, -1)  -- left the schedule (gone)
    end
  elseif url_fate == 'return' then
    local held = redis.call('HGET', PEND, token)
    if mine then
      requeue(host, mine, mine[5])
    elseif held then
      requeue_pending(token, held)
    else
      found = false
    end
  end
  -- the host
  if host_fate ~= '' and not mine then
    found = false  -- our lease had expired; whoever holds it now keeps it
  elseif host_fate ~= '' then
    local least = tonumber(redis.call('HGET', DELAYS, host) or 0)
    if least > delay then delay = least end
    local polite, block = delay, 0
    if host_fate == 'ok' then
      redis.call('HDEL', FAILS, host)
    elseif host_fate == 'fail' or host_fate == 'busy' then
      local fails = redis.call('HINCRBY', FAILS, host, 1)
      if host_fate == 'busy' and wait >= 0 then
        block = wait
      elseif host_fate == 'busy' or fails >= backoff_after then
        local k = host_fate == 'busy' and fails or (fails - backoff_after + 1)
        block = backoff_base * 2 ^ (k - 1)
      end
      if block > backoff_max then block = backoff_max end
      if block > delay then delay = block end
    end
    unlease(host, delay)
    note(host, host_fate, polite, block, wait)
  end
  if not found then stale = stale + 1 end
end

-- 3. renew the lease of a download still running; false: no longer here
--    (it expired and went back to its queue: the worker must not fetch it).
local function renew(host, token)
  local lease = redis.call('HGET', LEASE, host)
  if lease and cmsgpack.unpack(lease)[1] == token then
    redis.call('ZADD', LEASES, 'XX', now + ttl, host)
  elseif redis.call('ZSCORE', PENDING, token) then
    redis.call('ZADD', PENDING, 'XX', now + ttl, token)
  else
    return false
  end
  return true
end

-- A host whose best queued URL is a suspect of a trap has only suspects left:
-- they are dropped (item, just popped, with the rest of its queue), and the
-- host waits for its recrawls, if any.
local function drop_suspects(host, item)
  local rest = redis.call('ZRANGE', queue(host), 0, -1)
  rest[#rest + 1] = item[1]
  for j = 1, #rest, 4000 do
    redis.call('HDEL', payloads(host), unpack(rest, j, math.min(j + 3999, #rest)))
  end
  redis.call('DEL', queue(host))
  suspects = suspects + #rest
  queued_delta = queued_delta - #rest
  local due = recrawl_head(host)
  if due[2] then offer_due(host, tonumber(due[2])) end
end

-- An operator's block on host (0: none). One that has passed is removed.
local function blocked_until(host)
  local till = redis.call('ZSCORE', BLOCKED, host)
  if not till then return 0 end
  till = tonumber(till)
  if till > now then return till end
  redis.call('ZREM', BLOCKED, host)
  return 0
end

-- 4. lease: when asked, expired leases first go back (their worker died), then
--    hosts whose time has come move from heap to ready (a never-crawled URL
--    queued) and to rready (a recrawl due); then the best ones are leased,
--    want of them (0 while the crawl is paused), within the recrawl budget.
local function lease(asked, want)
  local out = {}
  if asked > 0 then
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, 1000)) do
      local l = cmsgpack.unpack(redis.call('HGET', LEASE, host))
      requeue(host, l, l[5])
      unlease(host, tonumber(redis.call('HGET', DELAYS, host) or 0))
      expired = expired + 1
    end
    for _, token in ipairs(redis.call('ZRANGEBYSCORE', PENDING, '-inf', now, 'LIMIT', 0, 1000)) do
      requeue_pending(token, redis.call('HGET', PEND, token))
      expired = expired + 1
    end
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', HEAP, '-inf', now, 'LIMIT', 0, 1000)) do
      redis.call('ZREM', HEAP, host)
      local head = redis.call('ZRANGE', queue(host), 0, 0, 'WITHSCORES')
      if head[2] then redis.call('ZADD', READY, head[2], host) end
      local due = recrawl_head(host)
      if due[2] then
        if tonumber(due[2]) <= now then
          redis.call('ZADD', RREADY, due[2], host)
          redis.call('ZREM', IDLE, host)  -- its politeness time has passed
        elseif not head[2] then
          redis.call('ZADD', HEAP, due[2], host)  -- woken early (a due time moved): wait on
        end
      end
    end
  end
  if want <= 0 then return out end
  bucket_fill()
  -- the best URL of the best ready host, one host after another: a
  -- never-crawled URL from ready or a recrawl from rready (recrawl_turn).
  -- The lease is {token, score, payload, fingerprint, kind}.
  while #out < 5 * want do
    if bucket_empty() then
      bucket_starved(redis.call('ZCARD', READY) + redis.call('ZCARD', RREADY) > 0)
      break
    end
    local n_new, n_old = redis.call('ZCARD', READY), redis.call('ZCARD', RREADY)
    if n_new + n_old == 0 then break end
    local recrawl = recrawl_turn(n_new, n_old)
    local top = redis.call('ZPOPMIN', recrawl and RREADY or READY)
    local host = top[1]
    redis.call('ZREM', recrawl and READY or RREADY, host)
    local item = {}
    local till = blocked_until(host)
    if till > 0 then
      redis.call('ZADD', HEAP, till, host)  -- its turn comes again then
    elseif recrawl then
      item = recrawl_pop(host)
    else
      item = redis.call('ZPOPMIN', queue(host))
    end
    if not recrawl and item[1] and trapped_suspect(host, item[2]) then
      drop_suspects(host, item)
      item = {}
    end
    if item[1] then
      local fp, score = item[1], item[2]
      local payload = redis.call('HGET', payloads(host), fp)
      redis.call('HDEL', payloads(host), fp)
      local token = redis.call('HINCRBY', STATS, 'leased', 1) .. '@' .. now
      local kind = 'n'
      if recrawl then
        kind = 'r'
        recrawl_leased()
        redis.call('HINCRBY', STATS, 'leased_recrawl', 1)
      else
        queued_delta = queued_delta - 1
        redis.call('HINCRBY', STATS, 'leased_new', 1)
      end
      count_kind(recrawl)
      redis.call('HSET', LEASE, host, cmsgpack.pack({token, score, payload, fp, kind}))
      count_page(host)
      redis.call('ZADD', LEASES, now + ttl, host)
      bucket_take()
      out[#out + 1] = host
      out[#out + 1] = token
      out[#out + 1] = score
      out[#out + 1] = payload
      out[#out + 1] = kind
    end
  end
  bucket_close()
  return out
end

-- The counters written, and when a host may next be ready here.
local function tally()
  if expired > 0 then redis.call('HINCRBY', STATS, 'expired', expired) end
  if dups > 0 then redis.call('HINCRBY', STATS, 'duplicates', dups) end
  if added > 0 then redis.call('HINCRBY', STATS, 'enqueued', added) end
  if bumped > 0 then redis.call('HINCRBY', STATS, 'bumped', bumped) end
  local queued = tonumber(redis.call('HINCRBY', STATS, 'queued', queued_delta))
  local scheduled = tonumber(redis.call('HINCRBY', STATS, 'scheduled', scheduled_delta))
  -- Entries put in a queue by anything but this script enter uncounted and
  -- leave counted: the counters stay in range, and queued is exact again
  -- whenever no host can hold a queued URL (none on the heap, ready or leased).
  -- The emptiness test reads those structures, not the counter (frontier.py).
  if queued < 0 or (queued > 0 and redis.call('ZCARD', HEAP) + redis.call('ZCARD', READY)
                    + redis.call('ZCARD', LEASES) == 0) then
    queued = 0
    redis.call('HSET', STATS, 'queued', 0)
  end
  if scheduled < 0 then
    scheduled = 0
    redis.call('HSET', STATS, 'scheduled', 0)
  end

  local next_ready = -1
  local first = redis.call('ZRANGE', HEAP, 0, 0, 'WITHSCORES')
  if first[2] then next_ready = tonumber(first[2]) end
  if redis.call('ZCARD', READY) + redis.call('ZCARD', RREADY) > 0 then next_ready = now end
  next_ready = bucket_next(next_ready)  -- ready hosts wait for the budget's next token
  for _, held in ipairs({LEASES, PENDING}) do
    local first_lease = redis.call('ZRANGE', held, 0, 0, 'WITHSCORES')
    if first_lease[2] and (next_ready < 0 or tonumber(first_lease[2]) < next_ready) then
      next_ready = tonumber(first_lease[2])  -- an expiry may free work then
    end
  end
  return queued, scheduled, next_ready
end
