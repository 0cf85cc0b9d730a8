"""Many workers on many machines sharing one Redis (or Redis Cluster).

Set REDIS_URL (and REDIS_CLUSTER=1 for a cluster) in the environment of every
worker; all workers with the same CRAWL_ID share one crawl. The broad-crawl
profile's download settings apply.
"""

import os

from settings.broad import *

# More partitions spread the frontier's hash slots over the cluster's nodes.
FRONTIER_PARTITIONS = int(os.environ.get("FRONTIER_PARTITIONS", "64"))
# Workers far from Redis renew leases less often relative to round-trip time.
FRONTIER_LEASE_TTL = 60.0
