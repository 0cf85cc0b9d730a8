"""Many workers on many machines sharing one Redis (or Redis Cluster).

Set REDIS_URL (and REDIS_CLUSTER=1 for a cluster) in the environment of every
worker; all workers with the same CRAWL_ID share one crawl. Without REDIS_URL
a worker stops with one line instead of crawling alone on an embedded server.
The partition count follows the server (FRONTIER_PARTITIONS None: 1 on one
server, a few per primary on a Redis Cluster). The broad-crawl profile's
download settings apply. docs/deploy.md walks from one machine to many.
"""

from settings.broad import *

REDIS_URL_REQUIRED = True
# Workers far from Redis renew leases less often relative to round-trip time.
FRONTIER_LEASE_TTL = 60.0
