-- Page metadata: one fetch history per URL fingerprint (crawlproj/stores/pagemeta.py).
--
-- KEYS[1]  the partition prefix  cp:{<crawl>/<p>}:   (all keys touched share its hash tag)
-- ARGV     n, then n times: fp (8 bytes), bucket, t_ms, status, ctype, length, digest (8 bytes
--          or ''), content (1 = a 2xx body whose digest counts for change detection)
--          or, for a parsed page's canonical URL: fp, bucket, t_ms, '', '', '', the URL, 'c'
--
-- Hash  <prefix>pm:<bucket>  field fp -> cmsgpack array
--   {first_ms, last_ms, status, ctype, length, digest, fetches, changes, rate_bucket
--    [, canonical]}
-- rate_bucket is WebFountain's one-byte change-rate class; the recrawl model sets it,
-- this script keeps it.  A change is counted when a 2xx body's digest differs from
-- the last 2xx body's digest [WebFountain §4: change detection by checksum].
-- canonical: the other URL the page's latest 2xx body names as its canonical one
-- (RFC 6596), set once the page is parsed, cleared by its next 2xx body.
-- One script call per partition per batch: the read-modify-write is atomic, so two
-- workers fetching one URL at once both count.
local P = KEYS[1]
local n = tonumber(ARGV[1])
local i = 2
local created = 0
for _ = 1, n do
  local fp, bucket, t, status, ctype, len, digest, content =
    ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), ARGV[i + 4],
    tonumber(ARGV[i + 5]), ARGV[i + 6], ARGV[i + 7]
  i = i + 8
  local key = P .. 'pm:' .. bucket
  local old = redis.call('HGET', key, fp)
  local rec
  if content == 'c' then
    -- a fetch's record comes first (the record middleware, then the spider)
    if old then
      rec = cmsgpack.unpack(old)
      if t >= rec[2] then
        rec[10] = digest
        redis.call('HSET', key, fp, cmsgpack.pack(rec))
      end
    end
  elseif not old then
    if content ~= '1' then digest = '' end
    rec = {t, t, status, ctype, len, digest, 1, 0, 0}
    created = created + 1
  else
    rec = cmsgpack.unpack(old)
    if t < rec[1] then rec[1] = t end
    if t >= rec[2] then
      rec[2] = t
      rec[3] = status
      rec[4] = ctype
      rec[5] = len
    end
    if content == '1' then
      if rec[6] ~= '' and rec[6] ~= digest then rec[8] = rec[8] + 1 end
      rec[6] = digest
      if t >= rec[2] then rec[10] = nil end
    end
    rec[7] = rec[7] + 1
  end
  if content ~= 'c' then
    redis.call('HSET', key, fp, cmsgpack.pack(rec))
  end
end
return created
