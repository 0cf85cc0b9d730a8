-- One worker's heartbeat: its counters' growth since the last heartbeat the
-- server answered, added to the crawl's totals and to the worker's own, and
-- its record, stamped with the server's time (workers on many machines never
-- compare their own clocks). One call, one round trip, every few seconds.
-- It also keeps the crawl's history (crawlproj/monitor/history.py): the
-- time the crawl has run, and one sample per slot of each ring, rewritten by
-- every heartbeat that falls in the slot (so a slot holds its last moment).
--
-- KEYS[1]  the crawl-wide prefix, "cp:{crawl}:" (crawlproj/redis/keyspace.py)
-- ARGV     worker id, forget_ms (workers silent this long are dropped from
--          the list, their records deleted), the history ('' = none, else
--          msgpack {gap_ms, {{slot_ms, kept}, ...}, {counter, ...},
--          {gauge, value, ...}}: heartbeats further apart than gap_ms leave
--          the time between out of the crawl's run time), the number of
--          record fields n, n field/value pairs, then counter triples: name,
--          the worker's value now, its value at the last answered heartbeat.
--          The growth added is counted from the worker's own record when it
--          has one, so a heartbeat applied whose answer was lost (a timeout)
--          and sent again adds nothing twice; from the last answer otherwise.
-- Returns now (ms).
local P = KEYS[1]
-- A server restarted without the crawl's state must not get a worker record,
-- totals or history from a worker that has not yet heard (as sync.lua).
if redis.call('EXISTS', P .. 'meta') == 0 then
  return redis.error_reply('CRAWLLOST the crawl\'s state is not on this server (no ' ..
                           P .. 'meta): it restarted without its data, or was flushed')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, forget = ARGV[1], tonumber(ARGV[2])
local W = P .. 'w:' .. id
local n = tonumber(ARGV[4])
local i = 5
if n > 0 then
  redis.call('HSET', W, unpack(ARGV, i, i + 2 * n - 1))
  i = i + 2 * n
end
redis.call('HSET', W, 'seen', now)
redis.call('HSETNX', W, 'since', now)
for j = i, #ARGV, 3 do
  local name, value = ARGV[j], tonumber(ARGV[j + 1])
  local have = redis.call('HGET', W, 'c:' .. name)
  local grown = value - tonumber(have or ARGV[j + 2])
  if grown ~= 0 then redis.call('HINCRBY', P .. 'totals', name, grown) end
  redis.call('HSET', W, 'c:' .. name, ARGV[j + 1])
end
redis.call('ZADD', P .. 'workers', now, id)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', P .. 'workers', '-inf', now - forget, 'LIMIT', 0, 100)) do
  redis.call('DEL', P .. 'w:' .. gone)
  redis.call('ZREM', P .. 'workers', gone)
end

if ARGV[3] ~= '' then
  local spec = cmsgpack.unpack(ARGV[3])
  local gap, rings, names, gauges = spec[1], spec[2], spec[3], spec[4]
  local H = P .. 'hist'
  local last = tonumber(redis.call('HGET', H, 'last') or 0)
  redis.call('HSETNX', H, 'first', now)
  if last > 0 and now > last and now - last <= gap then
    redis.call('HINCRBY', H, 'run_ms', now - last)
  end
  if now > last then redis.call('HSET', H, 'last', now) end
  -- the sample: the crawl's counters as they are now, the frontier as this
  -- worker last saw it, and each worker's own pages and bytes
  local sample = {t = now}
  local values = redis.call('HMGET', P .. 'totals', unpack(names))
  for k, name in ipairs(names) do sample[name] = tonumber(values[k] or 0) end
  for k = 1, #gauges, 2 do sample[gauges[k]] = gauges[k + 1] end
  local mine = redis.call('HMGET', W, 'c:figures/attempts', 'c:figures/document_bytes')
  for _, ring in ipairs(rings) do
    local slot_ms, kept = ring[1], ring[2]
    local R = H .. ':' .. slot_ms
    local slot = math.floor(now / slot_ms)
    local field = slot % kept
    local w = {}
    local old = redis.call('HGET', R, field)
    if old then
      local o = cmsgpack.unpack(old)
      if o.s == slot and type(o.w) == 'table' then w = o.w end
    end
    w[id] = {tonumber(mine[1] or 0), tonumber(mine[2] or 0)}
    sample.s, sample.w = slot, w
    redis.call('HSET', R, field, cmsgpack.pack(sample))
    redis.call('HSET', H, 'ring:' .. slot_ms, kept)
  end
end
return now
