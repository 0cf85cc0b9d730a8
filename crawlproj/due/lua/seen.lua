-- The DUE's URL-seen test (Najork & Heydon 2001, §3.2), as Lua functions that
-- other scripts are prepended with: frontier/lua/sync.lua calls
-- due_test_and_set() in its enqueue section, so that "unseen? then enqueue" is
-- one atomic step; due/lua/check.lua calls it for batches of fingerprints.
--
-- Everything lives in the caller's partition P (a key prefix carrying the
-- partition's hash tag, so a Redis Cluster keeps it on one node):
--   P..'due'            HASH   configuration (written once by crawlproj.due.urlseen)
--                              and state, see below
--   P..'seen:<L>:<a>'   SET    exact mode: fingerprints whose top bits are <a>
--   P..'bloom:<j>:<b>'  STRING bloom mode: bitmap <b> of layer <j>
--
-- Exact mode. Mercator kept 8-byte fingerprints in a table indexed by their
-- high-order bits. Here the table's buckets are small Redis sets of 64-bit
-- integers, which Redis keeps as intsets: sorted arrays of 8-byte integers
-- with no per-element overhead, as long as they hold at most
-- set-max-intset-entries. So the number of buckets grows with the crawl: the
-- buckets form a linear hash table (Litwin 1980) on the fingerprint's top
-- bits. At level L with split pointer s, a fingerprint whose top L bits are
-- a < s lives in bucket (its top L+1 bits) of level L+1, else in bucket a of
-- level L. When the table holds more than `load` fingerprints per bucket,
-- bucket s is split into two of level L+1 and s advances; at 2^L, L grows.
-- A bucket then holds about load/2 to 2 x load fingerprints at every size of
-- the crawl, and memory stays near 8 bytes per URL from a thousand URLs to
-- billions, with no bucket count to guess up front.
--   state: n (fingerprints, counted by sampling: see counted()), L, s; load
--   is Python's (crawlproj.due.urlseen.URLSeen.fitted_load): at most the
--   server's set-max-intset-entries / 2.5, so that no bucket outgrows it
-- A 64-bit fingerprint (signed decimal, the form an intset stores) is
-- addressed by its top bits read through a Lua double: the double loses low
-- bits, but its top bits are a deterministic function of the string, the same
-- at insert, lookup and split, which is all a hash table needs. A 128-bit
-- fingerprint comes as 16 raw bytes in `aux` and is stored as such (listpack
-- sets: docs/due.md has their cost).
--
-- Bloom mode, for crawls beyond memory: a blocked Bloom filter (crawlproj.due.
-- bloom): a URL's k bits lie in one block of 8192 bits of one bitmap, placed
-- by hash words in `aux` (see probe()). Layers: when the newest layer holds
-- its capacity, a new one twice as large at half the rate is started
-- (scalable Bloom filters, Almeida et al. 2007).
--   spec: 'k,blocks,cap;...' for every possible layer (written by Python)
--   state: n (URLs, counted exactly), nl (layers started), base (n when the newest began)

local due = nil   -- this call's view of P..'due', loaded on first use

local TWO64 = 18446744073709551616
local POW = {}  -- POW[i] = 2^i, made on first use (not by every sync call)
local BLOCK_BYTES, BLOCKS_PER_BITMAP = 1024, 16384
local SPLIT_SLACK = 64  -- splits a call may make beyond its own inserts' (see counted())
local BIT = {128, 64, 32, 16, 8, 4, 2, 1}  -- Redis numbers bits from the high end
local byte = string.byte

local function due_state(P)
  if due ~= nil and due.P == P then return due end
  if POW[0] == nil then
    for i = 0, 64 do POW[i] = 2 ^ i end
  end
  local key = P .. 'due'
  local v = redis.call('HMGET', key, 'mode', 'bits', 'load', 'n', 'L', 's', 'spec', 'nl', 'base')
  if not v[1] then
    error('DUE not configured for ' .. P .. ' (no ' .. key .. '): ' ..
          'the crawl\'s DUE is set up by crawlproj.due.urlseen.URLSeen')
  end
  due = {P = P, key = key, mode = v[1], bits = tonumber(v[2]), load = tonumber(v[3] or 0),
         n = tonumber(v[4] or 0), L = tonumber(v[5] or 0), s = tonumber(v[6] or 0),
         nl = tonumber(v[8] or 0), base = tonumber(v[9] or 0), keys = {}, layers = {},
         budget = SPLIT_SLACK}
  if due.mode == 'bloom' then
    for k, blocks, cap in string.gmatch(v[7], '(%d+),(%d+),(%d+)') do
      due.layers[#due.layers + 1] = {k = tonumber(k), blocks = tonumber(blocks),
                                     cap = tonumber(cap)}
    end
  end
  return due
end

-- ---------------------------------------------------------------- exact mode

-- The fingerprint as an unsigned number whose top bits are exact (see above).
local function value(d, m)
  if d.bits == 64 then
    local x = tonumber(m)
    if x < 0 then x = x + TWO64 end
    return x
  end
  local b1, b2, b3, b4, b5, b6 = byte(m, 1, 6)  -- 128-bit: the top 48 bits are plenty
  return (((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6) * 65536
end

-- Bucket of value x at a level: its top `level` bits. A double may round a
-- value just below 2^64 up to 2^64: the last bucket takes it.
local function addr(x, level)
  local a = x / POW[64 - level]
  a = a - a % 1
  if a >= POW[level] then a = POW[level] - 1 end
  return a
end

local function bucket_key(d, x)
  local level = d.L
  local a = addr(x, level)
  if a < d.s then level, a = level + 1, addr(x, level + 1) end
  local id = level * 17179869184 + a   -- (level, a) as one exact double: a < 2^34
  local key = d.keys[id]
  if key == nil then
    key = d.P .. 'seen:' .. level .. ':' .. a
    d.keys[id] = key
  end
  return key
end

-- bucket_key(d, value(d, fp)) for a 64-bit fingerprint, inlined: this is the
-- path of every link of every page, and Lua function calls are not free.
local function bucket_key64(d, fp)
  local x = tonumber(fp)
  if x < 0 then x = x + TWO64 end
  local level, top = d.L, POW[d.L]
  local a = x / POW[64 - level]
  a = a - a % 1
  if a >= top then a = top - 1 end
  if a < d.s then
    level, top = level + 1, top * 2
    a = x / POW[64 - level]
    a = a - a % 1
    if a >= top then a = top - 1 end
  end
  local id = level * 17179869184 + a
  local key = d.keys[id]
  if key == nil then
    key = d.P .. 'seen:' .. level .. ':' .. a
    d.keys[id] = key
  end
  return key
end

local function sadd_all(key, members)
  for i = 1, #members, 4000 do  -- unpack() is bounded by Lua's C stack
    redis.call('SADD', key, unpack(members, i, math.min(i + 3999, #members)))
  end
end

-- Split bucket s of level L into buckets 2s and 2s+1 of level L+1.
local function split(d)
  local L, s = d.L, d.s
  local old = d.P .. 'seen:' .. L .. ':' .. s
  local left, right = {}, {}
  for _, m in ipairs(redis.call('SMEMBERS', old)) do
    if addr(value(d, m), L + 1) == 2 * s then left[#left + 1] = m else right[#right + 1] = m end
  end
  sadd_all(d.P .. 'seen:' .. (L + 1) .. ':' .. (2 * s), left)
  sadd_all(d.P .. 'seen:' .. (L + 1) .. ':' .. (2 * s + 1), right)
  redis.call('DEL', old)
  s = s + 1
  if s == POW[L] then L, s = L + 1, 0 end
  d.L, d.s = L, s
  redis.call('HSET', d.key, 'L', L, 's', s)
end

-- The number of fingerprints is counted by sampling: one in ten, chosen by the
-- fingerprint's tens digit, adds 10 (not the last digit: it is tied to the
-- parity). The count only decides when to split a bucket, so +-3/sqrt(n) is
-- plenty, and nine in ten inserts write nothing but the fingerprint (nor
-- append anything else to the AOF). Call after a new fingerprint fp was added.
--
-- A call splits the buckets its own inserts call for (10 / load per count)
-- plus at most SPLIT_SLACK more. The slack absorbs the sampling's noise; the
-- bound matters when the load was lowered (crawlproj.due.urlseen: a crawl
-- begun on a server that kept larger sets compact), when the table is many
-- splits behind: it then catches up a few dozen buckets per call, as new URLs
-- come, instead of blocking the server for all of them at once. A table behind
-- is as correct as any: (L, s) always says where each fingerprint is.
local function counted(d, fp)
  if byte(fp, -2) == 48 then
    d.n = redis.call('HINCRBY', d.key, 'n', 10)
    d.budget = d.budget + 10 / d.load
    while d.budget >= 1 and d.n > d.load * (POW[d.L] + d.s) and d.L < 32 do
      d.budget = d.budget - 1
      split(d)
    end
  end
end

local function exact(d, fp, aux, set)
  local member, key
  if d.bits == 64 then member, key = fp, bucket_key64(d, fp)
  else member, key = aux, bucket_key(d, value(d, aux)) end
  if not set then return redis.call('SISMEMBER', key, member) == 0 end
  if redis.call('SADD', key, member) == 0 then return false end
  counted(d, fp)
  return true
end

-- ---------------------------------------------------------------- bloom mode

local function bitmap_key(d, j, b)
  local id = j * 4294967296 + b
  local key = d.keys[id]
  if key == nil then
    key = d.P .. 'bloom:' .. j .. ':' .. b
    d.keys[id] = key
  end
  return key
end

local function new_layer(d)
  local j = d.nl
  local ly = d.layers[j + 1]
  if ly == nil then error('DUE bloom filter: all ' .. #d.layers .. ' layers are full') end
  local left = ly.blocks
  for b = 0, math.ceil(ly.blocks / BLOCKS_PER_BITMAP) - 1 do
    -- the whole bitmap at once: one allocation, not a realloc per new block
    local blocks = math.min(left, BLOCKS_PER_BITMAP)
    redis.call('SETRANGE', bitmap_key(d, j, b), blocks * BLOCK_BYTES - 1, '\0')
    left = left - blocks
  end
  d.nl, d.base = j + 1, d.n
  redis.call('HSET', d.key, 'nl', d.nl, 'base', d.base)
end

-- Test the URL's k bits in layer j (0-based). Returns whether all are set;
-- with `all`, also the key, the block's byte offset and the unset bits.
-- aux: a 32-bit word choosing the block, then 16-bit words whose low 13 bits
-- are the positions in the block, all from independent hashes (Python's side:
-- crawlproj.due.urlseen.URLSeen.aux). Positions made in Lua by double hashing
-- from a few words would tie a URL's bits together: some URLs would get
-- near-repeating patterns, and the rate would be many times the configured one.
local function probe(d, j, aux, all)
  local ly = d.layers[j + 1]
  local b1, b2, b3, b4 = byte(aux, 1, 4)
  local bi = (((b1 * 256 + b2) * 256 + b3) * 256 + b4) % ly.blocks
  local key = bitmap_key(d, j, (bi - bi % BLOCKS_PER_BITMAP) / BLOCKS_PER_BITMAP)
  local off = (bi % BLOCKS_PER_BITMAP) * BLOCK_BYTES
  local block = redis.call('GETRANGE', key, off, off + BLOCK_BYTES - 1)
  local w = {byte(aux, 5, 4 + 2 * ly.k)}
  local zeros = nil
  for i = 1, 2 * ly.k, 2 do
    local p = (w[i] % 32) * 256 + w[i + 1]
    local r = p % 8
    if bit.band(byte(block, (p - r) / 8 + 1) or 0, BIT[r + 1]) == 0 then
      if not all then return false end
      zeros = zeros or {}
      zeros[#zeros + 1] = p
    end
  end
  return zeros == nil, key, off, zeros
end

local function bloom(d, fp, aux, set)
  if set and (d.nl == 0 or d.n - d.base >= d.layers[d.nl].cap) then new_layer(d) end
  if d.nl == 0 then return true end
  -- the newest layer first (recent URLs come back soonest), noting its unset bits
  local hit, key, off, zeros = probe(d, d.nl - 1, aux, set)
  if hit then return false end
  for j = d.nl - 2, 0, -1 do
    if probe(d, j, aux, false) then return false end
  end
  if not set then return true end
  local args = {key}
  for i = 1, #zeros do
    args[#args + 1] = 'SET'
    args[#args + 1] = 'u1'
    args[#args + 1] = off * 8 + zeros[i]
    args[#args + 1] = 1
  end
  redis.call('BITFIELD', unpack(args))
  -- counted exactly: the count decides when a layer is full
  d.n = redis.call('HINCRBY', d.key, 'n', 1)
  return true
end

-- ---------------------------------------------------------------- entry points

-- Whether the URL with fingerprint fp (and the mode's aux field) is new; marks
-- it seen. fp: signed decimal fingerprint; aux: '' (exact, 64-bit), the
-- fingerprint as 16 raw bytes (exact, 128-bit), hash words (bloom, see probe()).
local function due_test_and_set(P, fp, aux)
  local d = due_state(P)
  if d.mode == 'bloom' then return bloom(d, fp, aux, true) end
  return exact(d, fp, aux, true)
end

-- Whether it is new, without marking it.
local function due_test(P, fp, aux)
  local d = due_state(P)
  if d.mode == 'bloom' then return bloom(d, fp, aux, false) end
  return exact(d, fp, aux, false)
end
