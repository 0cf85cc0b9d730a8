"""The Redis layer: every way a crawlproj process reaches its Redis server.

Here:
    client.py       the client of a process, one per server, shared (REDIS_URL,
                    a cluster, or the embedded server), script text as package
                    data, and what a failure means (a refusal for good, or an
                    outage to wait out)
    embedded.py     the embedded server used when REDIS_URL is unset
    keyspace.py     the key names of a crawl: its id, host partitions, hash tags
    groupcommit.py  the batching primitive: one pipelined write at a time,
                    whatever arrived meanwhile in the next (GroupCommit), and
                    its kind for per-page tests that must answer (GroupCall)
    guard.py        what a worker does when Redis refuses it or stays away
    lockedwork.py   a crawl-wide job held by one worker at a time (a Redis lock)

Everything else (the frontier, the DUE, the stores, the monitor) takes its
client, keys and batching from here. redis-py is blocking: its calls run in
threads of the reactor's pool, never on the reactor thread. This package's name does not shadow
redis-py: modules import it absolutely (`import redis` is redis-py).
"""
