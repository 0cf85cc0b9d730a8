-- One worker's heartbeat: its counters' growth since the last heartbeat the
-- server answered, added to the crawl's totals and to the worker's own, and
-- its record, stamped with the server's time (workers on many machines never
-- compare their own clocks). One call, one round trip, every few seconds.
--
-- KEYS[1]  the crawl-wide prefix, "cp:{crawl}:" (crawlproj/keyspace.py)
-- ARGV     worker id, forget_ms (workers silent this long are dropped from
--          the list, their records deleted), the number of record fields n,
--          n field/value pairs, then counter/increment pairs
-- Returns now (ms).
local P = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, forget = ARGV[1], tonumber(ARGV[2])
local W = P .. 'w:' .. id
local n = tonumber(ARGV[3])
local i = 4
if n > 0 then
  redis.call('HSET', W, unpack(ARGV, i, i + 2 * n - 1))
  i = i + 2 * n
end
redis.call('HSET', W, 'seen', now)
redis.call('HSETNX', W, 'since', now)
for j = i, #ARGV, 2 do
  redis.call('HINCRBY', P .. 'totals', ARGV[j], ARGV[j + 1])
  redis.call('HINCRBY', W, 'c:' .. ARGV[j], ARGV[j + 1])
end
redis.call('ZADD', P .. 'workers', now, id)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', P .. 'workers', '-inf', now - forget, 'LIMIT', 0, 100)) do
  redis.call('DEL', P .. 'w:' .. gone)
  redis.call('ZREM', P .. 'workers', gone)
end
return now
