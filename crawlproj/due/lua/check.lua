
-- The URL-seen test for a batch of fingerprints of ONE partition, apart from
-- the frontier (crawlproj.due.urlseen.URLSeen.check: the dupefilter, tools,
-- benchmarks). Prepended with seen.lua.
-- KEYS[1]  the partition's key prefix
-- ARGV     'set' (test-and-set) or 'test' (test only), then the fingerprints:
--          fp, aux pairs; exact mode with 64-bit fingerprints: fp alone
-- Returns a string with one character per fingerprint: '1' new, '0' seen.
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
return table.concat(out)
