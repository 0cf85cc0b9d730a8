-- The sync script's main part: one worker's atomic round trip with ONE
-- partition of the frontier (Mercator's, Najork & Heydon 2001, §3.1, shared by
-- every worker in Redis). It reads the arguments and calls the other parts'
-- sections in order; crawlproj/frontier/frontier.py composes the script from
-- the parts, in this order, and loads it once (one EVALSHA per partition per
-- sync):
--   crawlproj/due/lua/seen.lua           the DUE's URL-seen test (Mercator §3.2)
--   crawlproj/monitor/lua/sync_control.lua   CRAWLLOST; pause and stop
--   crawlproj/traps/lua/sync_budgets.lua     the trap guard's per-host budgets
--   crawlproj/recrawl/lua/sync_recrawl.lua   recrawl queues, budget, new share
--                                            (WebFountain, Edwards et al. 2001)
--   crawlproj/frontier/lua/frontier.lua      host states, queues, leases, releases
--   crawlproj/frontier/lua/sync.lua          this
-- Each part says what it holds, defines and uses; a part uses only the parts
-- before it. Uses: crawl_lost, crawl_control (control); budgets_open,
-- over_queued, over_pages (budgets); recrawl_open, RREADY, leased_recrawl,
-- budget_waits (recrawl); frontier_open, enqueue, release, renew, lease,
-- tally and the counts (frontier).
--
-- KEYS[1]  the partition's key prefix, e.g. "cp:{crawl/3}:" (routes the call
--          to the cluster node that holds the partition's hash slot)
-- ARGV     lease_ttl_ms, backoff_base_ms, backoff_max_ms, backoff_after,
--          host_max_queued, host_max_pages (the trap guard's per-host budgets,
--          0 = none: a new URL of a host with host_max_queued URLs queued, or
--          with host_max_pages URLs leased so far plus queued, is refused; the
--          leases are counted per host in hostpages, only while that budget is
--          on), then the recrawl budget: fetches per second for this
--          partition (0 = none), the token bucket's depth, and the share of
--          leases for never-crawled URLs when both kinds are ready; then four
--          sections:
--   enqueue: one msgpack array (or ''), 8 fields per URL:
--            host, fingerprint, aux, score, payload, force, bump, first
--            aux: what the DUE's seen test needs besides the fingerprint
--            bump: added to the score of this URL if it is already queued
--            (a duplicate link to it); '<' and a score: that score instead
--            when lower than the queued one; '0' = leave it
--            first: the score instead, if this is the first URL of a host the
--            crawl never saw (WebCrawler's host-first order); '' = no such rule
--   release: a count, then host, token, host_fate, url_fate, delay_ms,
--            wait_ms, due_ms, payload, old_bucket, new_bucket (10 each;
--            crawlproj/frontier/frontier.py names them).
--            host_fate, applied only if token holds the host's lease (a
--            release whose token holds it must say what becomes of it):
--              '' nothing; ok: downloaded,
--              contact again after delay_ms, failures forgotten; fail: a
--              connection failure, counted, backoff after backoff_after of
--              them; busy: 429/503, counted, blocked wait_ms (Retry-After)
--              or with backoff when wait_ms < 0; free: nothing downloaded,
--              back after delay_ms, counts unchanged
--            url_fate, for the URL of token (in the host's lease or pending):
--              '' nothing; pending: leased by itself until done; done: the
--              page is done, the lease ends; return: back to its queue;
--              recrawl: the page is done and due again due_ms from now, with
--              payload (the page's recrawl state); old_bucket, new_bucket: its
--              change-rate bucket before and after (-1 = none), counted in
--              rbuckets (done with old_bucket >= 0: the page left the schedule)
--   renew:   a count, then host, token                            (2 each)
--   lease:   n, how many URLs to lease (one per host); none while the crawl
--            is paused (control), though expired leases still go back
-- Returns { now_ms, {host, token, score, payload, kind, ...}, counts, lost }
--   (kind 'r' for a recrawl, 'n' for a never-crawled URL), counts
--   a flat list of name, value: added, duplicates, bumped, stale, expired,
--   refused_host_queued, refused_host_pages, refused_suspects,
--   next_ready_ms, heap, ready, leases, queued, pending, scheduled (URLs in
--   recrawl queues), rready, leased_recrawl, budget_waits, paused, stopped
--   (the server ms of the crawl's pause and stop, 0 = none), backed_off
--   (hosts with failures in a row, the heartbeat's history); lost the tokens
--   of renewals that found no lease: they expired and went back to their
--   queues, the worker must not fetch them (a fencing answer, docs/frontier.md).

local P = KEYS[1]
local gone = crawl_lost(P)
if gone then return gone end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
budgets_open(P, tonumber(ARGV[5]), tonumber(ARGV[6]))
recrawl_open(P, now, tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]))
frontier_open(P, now, tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
              tonumber(ARGV[4]))
local i = 10

-- 1. enqueue
enqueue(ARGV[i] ~= '' and cmsgpack.unpack(ARGV[i]) or {})
i = i + 1

-- 2. release
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  release(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]),
          tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]), ARGV[i + 7], tonumber(ARGV[i + 8]),
          tonumber(ARGV[i + 9]))
  i = i + 10
end

-- 3. renew
local lost = {}
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  if not renew(ARGV[i], ARGV[i + 1]) then lost[#lost + 1] = ARGV[i + 1] end
  i = i + 2
end

-- 4. lease: paused, every worker finishes what it holds and is given nothing new
local asked = tonumber(ARGV[i])
local paused, stopped = crawl_control(P)
local out = lease(asked, paused > 0 and 0 or asked)

local queued, scheduled, next_ready = tally()
return {now, out, {'added', added, 'duplicates', dups, 'bumped', bumped, 'stale', stale,
                   'expired', expired, 'refused_host_queued', over_queued,
                   'refused_host_pages', over_pages, 'refused_suspects', suspects, 'next_ready_ms', next_ready,
                   'heap', redis.call('ZCARD', HEAP), 'ready', redis.call('ZCARD', READY),
                   'leases', redis.call('ZCARD', LEASES), 'queued', queued,
                   'pending', redis.call('ZCARD', PENDING), 'scheduled', scheduled,
                   'rready', redis.call('ZCARD', RREADY), 'leased_recrawl', leased_recrawl,
                   'budget_waits', budget_waits, 'paused', paused, 'stopped', stopped,
                   'backed_off', redis.call('HLEN', FAILS)}, lost}
