"""The project's settings as Scrapy loads them."""

from __future__ import annotations

from scrapy.utils.test import get_crawler


def test_scrapy_loads_every_project_middleware(caplog):
    """Scrapy skips a middleware method it cannot use with only an error in the
    log (a spider middleware of this project was skipped so, unnoticed, under
    Scrapy 2.19): build the managers from the project's settings and check
    that each project middleware is in."""
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
    from scrapy.core.spidermw import SpiderMiddlewareManager
    from scrapy.utils.project import get_project_settings

    project = get_project_settings()
    crawler = get_crawler(settings_dict={  # the project's middlewares, not its reactor
        key: project[key] for key in project if "MIDDLEWARES" in key or key.startswith("ROBOTSTXT")})
    with caplog.at_level("ERROR"):
        spider_mw = SpiderMiddlewareManager.from_crawler(crawler)
        DownloaderMiddlewareManager.from_crawler(crawler)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    loaded = {type(mw).__module__ + "." + type(mw).__name__ for mw in spider_mw.middlewares}
    for path, order in project.getdict("SPIDER_MIDDLEWARES").items():
        if order is not None:
            assert path in loaded, path
