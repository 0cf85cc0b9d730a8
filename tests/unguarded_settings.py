"""settings.base without the address guard, and with Scrapy's download handlers
of other schemes: the control crawls of tests/test_addressguard_e2e.py, which
show that each case reaches the loopback listener when nothing refuses it."""

from settings.base import *  # noqa: F403

DOWNLOADER_MIDDLEWARES = {**DOWNLOADER_MIDDLEWARES,  # noqa: F405
                          "middlewares.addressguard.AddressGuardMiddleware": None}
DOWNLOAD_HANDLERS = {}
