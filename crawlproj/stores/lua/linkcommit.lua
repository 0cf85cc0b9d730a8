-- Commit a link-store compaction (crawlproj/stores/linkstore.py).
--
-- KEYS[1]  the partition prefix  cp:{<crawl>/<p>}:
-- ARGV     lock token, n (pages written to the segment), segment descriptor (msgpack)
--
-- Only the holder of the compaction lock may commit: a compactor whose lock ran
-- out (it was too slow, or paused) must not trim pages another compactor has
-- also read.  Trimming the working set and registering the segment happen
-- together, so a page is always in exactly one of the two.
local P = KEYS[1]
if redis.call('GET', P .. 'links:lock') ~= ARGV[1] then
  return 0
end
local n = tonumber(ARGV[2])
redis.call('LTRIM', P .. 'links', n, -1)
redis.call('RPUSH', P .. 'links:segments', ARGV[3])
redis.call('DEL', P .. 'links:lock')
return 1
