"""One machine: the embedded Redis, a few workers, modest concurrency."""

from settings.base import *  # noqa: F401,F403

CONCURRENT_REQUESTS = 32
LOG_LEVEL = "INFO"
