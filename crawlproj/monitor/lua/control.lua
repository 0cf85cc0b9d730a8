-- Set or clear fields of one control hash.
--
-- KEYS[1]  a control hash: a partition's (which sync.lua reads at every lease
--          hand-out) or the crawl's record of the last command
-- ARGV[1]  the field to set ('' = none)
-- ARGV[2]  the time to set it to, in ms ('' = the server's time now): one
--          command is one moment, so every hash after the first gets the
--          first one's stamp
-- ARGV[3:] fields to delete
-- Returns the stamp (ms).
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], ARGV[1], now) end
if #ARGV > 2 then redis.call('HDEL', KEYS[1], unpack(ARGV, 3)) end
return now
