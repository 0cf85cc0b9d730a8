
-- The URL-seen test for a batch of fingerprints of ONE partition, apart from
-- the frontier (crawlproj.due.urlseen.URLSeen.check: the dupefilter, tools,
-- benchmarks). Prepended with seen.lua.
-- KEYS[1]  the partition's key prefix
-- ARGV     'set' (test-and-set) or 'test' (test only), then the fingerprints:
--          fp, aux pairs; exact mode with 64-bit fingerprints: fp alone
-- Returns a string with one character per fingerprint: '1' new, '0' seen.
local GC_AFTER = 256  -- arguments of a call that collects its garbage (below)
local P = KEYS[1]
local d = due_state(P)
local set = ARGV[1] == 'set'
local out = {}
if d.mode == 'exact' and d.bits == 64 and set then
  -- exact() for the commonest case, inlined: one Lua call less per fingerprint
  for i = 2, #ARGV do
    local fp = ARGV[i]
    if redis.call('SADD', bucket_key64(d, fp), fp) == 1 then
      out[i - 1] = '1'
      counted(d, fp)
    else
      out[i - 1] = '0'
    end
  end
elseif d.mode == 'exact' and d.bits == 64 then
  for i = 2, #ARGV do
    out[i - 1] = exact(d, ARGV[i], '', false) and '1' or '0'
  end
else
  local f = d.mode == 'bloom' and bloom or exact
  for i = 2, #ARGV, 2 do
    out[#out + 1] = f(d, ARGV[i], ARGV[i + 1], set) and '1' or '0'
  end
end
local reply = table.concat(out)
-- This call's garbage (the fingerprints' strings, the tables above) is
-- collected now. Left to Redis, which steps Lua's collector only every 50th
-- script call, the scripts' heap floats a few MB above what they keep, and
-- Redis 7.4+ counts that heap in used_memory: 2.5 to 2.7 bytes per URL at 1M
-- URLs in calls of 10,000. Collected here, the heap at rest is what the
-- scripts keep plus the last call's ARGV (Redis holds it until the next
-- call), which the calls' size bounds (URLSeen.CALL_SIZE): 0.24 bytes per
-- URL at 1M. A full collection marks about 200 KB; no CPU cost per
-- fingerprint showed beside the calls' own (docs/due.md, "The scripts' heap").
-- A call of a few fingerprints (request_seen) leaves its little garbage to
-- Redis's steps.
if #ARGV > GC_AFTER then
  out, d, due = nil, nil, nil
  collectgarbage('collect')
end
return reply
