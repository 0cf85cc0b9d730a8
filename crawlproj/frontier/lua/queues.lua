-- The lengths of the host queues named in KEYS (all of one partition, so one
-- hash slot): the hosts page reads thousands of them in one call, where a
-- command each costs the client more than the server (bench/operator_bench.py).
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('ZCARD', key) end
return out
