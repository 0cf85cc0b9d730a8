-- Set or clear fields of one control hash, stamped with the server's time.
--
-- KEYS[1]  a control hash: a partition's (which sync.lua reads at every lease
--          hand-out) or the crawl's record of the last command
-- ARGV     the field to set to now (ms; '' = none), then fields to delete
-- Returns now (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], ARGV[1], now) end
if #ARGV > 1 then redis.call('HDEL', KEYS[1], unpack(ARGV, 2)) end
return now
