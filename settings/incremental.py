"""Continuous, incremental crawling on top of base [WebFountain §3-5].

Every fetched page is fetched again, when its change-rate bucket and the
policy's plan say, within a budget of fetches per second for the whole crawl
(docs/recrawl.md, "The live crawl"). The crawl does not finish on its own:
Ctrl-C or SIGTERM stops it, the same CRAWL_ID resumes it.
"""

from settings.base import *

RECRAWL_ENABLED = True
RECRAWL_POLICY = "optimal"
