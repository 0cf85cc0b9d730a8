"""The project's settings as Scrapy loads them."""

from __future__ import annotations

from scrapy.utils.test import get_crawler


def test_scrapy_loads_every_project_middleware(caplog, redis_url):
    """Scrapy skips a middleware method it cannot use with only an error in the
    log (a spider middleware of this project was skipped so, unnoticed, under
    Scrapy 2.19): build the managers from the project's settings and check
    that each project middleware is in."""
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
    from scrapy.core.spidermw import SpiderMiddlewareManager
    from scrapy.utils.misc import load_object
    from scrapy.utils.project import get_project_settings

    from crawlproj.spiders.web import WebSpider

    project = get_project_settings()
    crawler = get_crawler(WebSpider, {  # the project's middlewares, not its reactor
        "REDIS_URL": redis_url,
        "SCHEDULER": project["SCHEDULER"],  # the trap guard stands aside under another
        "CRAWL_PROXY": "http://127.0.0.1:8899",  # else its middleware is rightly not configured
        # the address guard checks that http(s) is downloaded by a handler it can guard
        "DOWNLOAD_HANDLERS": dict(project.getwithbase("DOWNLOAD_HANDLERS")),
        **{key: project[key] for key in project
           if "MIDDLEWARES" in key or key.startswith("ROBOTSTXT")}})
    with caplog.at_level("ERROR"):
        spider_mw = SpiderMiddlewareManager.from_crawler(crawler)
        downloader_mw = DownloaderMiddlewareManager.from_crawler(crawler)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    for manager, setting in ((spider_mw, "SPIDER_MIDDLEWARES"),
                             (downloader_mw, "DOWNLOADER_MIDDLEWARES")):
        # a path of middlewares/ names the class its feature's package holds
        loaded = {type(mw) for mw in manager.middlewares}
        for path, order in project.getdict(setting).items():
            if order is not None:
                assert load_object(path) in loaded, path


def test_no_worker_serves_a_console_that_runs_code():
    """Scrapy's telnet console and its remote-control HTTP server (2.19, on by
    default) each run Python sent to a local port: in a worker, whose process
    holds the crawl's Redis password, they are off."""
    import scrapy
    from scrapy.utils.project import get_project_settings

    project = get_project_settings()
    assert not project.getbool("TELNETCONSOLE_ENABLED")
    assert not project.getbool("REMOTE_CONTROL_ENABLED")
    try:
        from scrapy.extensions.remote_control import RemoteControl
    except ImportError:  # a Scrapy before 2.19 has no such server
        assert scrapy.version_info < (2, 19)
        return
    crawler = get_crawler(settings_dict={"REMOTE_CONTROL_ENABLED":
                                         project.getbool("REMOTE_CONTROL_ENABLED")})
    try:
        RemoteControl.from_crawler(crawler)
    except Exception as exc:  # NotConfigured: the extension stays out
        assert type(exc).__name__ == "NotConfigured"
    else:
        raise AssertionError("the remote-control extension would start")
