"""GET /metrics: the crawl status of every crawl on the server in Prometheus'
text format (prometheus-client), each series labelled with its crawl_id.

Counters are the crawl's totals (they only grow while the crawl's record
lives); gauges are the frontier and the workers as of now. The figures are
crawlproj/monitor/status.py's, the same the dashboard shows; docs/monitor.md
lists them, and docs/grafana-dashboard.json draws them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from twisted.internet import threads
from twisted.web import resource, server

from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace

COUNTERS = (  # name, help, figure path in the status
    ("crawlproj_pages_fetched", "Download attempts of pages (robots.txt apart)", ("fetched",)),
    ("crawlproj_document_bytes", "Bytes of documents fetched with status 200",
     ("figures", "document_bytes")),
    ("crawlproj_documents", "Documents fetched with status 200", ("figures", "documents")),
    ("crawlproj_robots_fetches", "robots.txt downloads", ("figures", "robots_fetches")),
    ("crawlproj_sitemaps_fetched", "Sitemap files read", ("sitemaps", "fetched")),
    ("crawlproj_sitemap_urls", "URLs read in sitemaps", ("sitemaps", "urls_found")),
    ("crawlproj_urls_enqueued", "URLs admitted to the frontier", ("frontier", "enqueued")),
    ("crawlproj_urls_duplicate", "Links to URLs seen before (the DUE)", ("frontier", "duplicates")),
    ("crawlproj_leases", "Leases handed out by the frontier", ("frontier", "leased")),
    ("crawlproj_leases_expired", "Leases that expired and went back to their queues",
     ("frontier", "expired_leases")),
    ("crawlproj_pages_noindex", "Pages that said noindex (robots meta tag or X-Robots-Tag)",
     ("politeness", "pages_noindex")),
    ("crawlproj_pages_nofollow", "Pages that said nofollow", ("politeness", "pages_nofollow")),
    ("crawlproj_links_nofollow", "Links not followed for nofollow (their rel, or their page)",
     ("politeness", "links_nofollow")),
)
GAUGES = (
    ("crawlproj_queued_urls", "URLs queued in the frontier", ("queued",)),
    ("crawlproj_discovered_urls", "URLs fetched, queued or leased", ("discovered",)),
    ("crawlproj_pages_pending", "Pages downloaded whose links are not in yet",
     ("frontier", "pages_pending")),
    ("crawlproj_deepest_host_queue", "Longest host queue (of those sampled)",
     ("frontier", "deepest_queue")),
    ("crawlproj_average_host_queue", "Queued URLs per host with a queue",
     ("frontier", "average_queue")),
    ("crawlproj_pages_per_second", "Pages per second, over the workers' last heartbeats",
     ("rates", "pages_s_now")),
    ("crawlproj_megabytes_per_second", "MB of documents per second, now",
     ("rates", "mb_s_now")),
    ("crawlproj_hosts_crawl_delay", "Hosts whose robots.txt sets a Crawl-delay",
     ("politeness", "hosts_crawl_delay")),
    ("crawlproj_run_seconds", "Time the crawl has run (gaps with no worker left out)",
     ("rates", "run_s")),
)
HOST_STATES = ("ready", "waiting", "leased", "backed_off")
CRAWL_STATES = ("running", "paused", "stopping", "stopped", "idle")
WORKER_STATES = ("running", "paused", "closing", "closed", "gone")


def _at(s: dict, path: tuple):
    for part in path:
        s = s[part]
    return s or 0


class CrawlCollector:
    """Reads every crawl's status at each scrape (prometheus-client calls collect)."""

    def __init__(self, redis_of):
        self.redis_of = redis_of

    def collect(self):
        up = GaugeMetricFamily("crawlproj_redis_up", "1 if the crawl's Redis answered this scrape")
        try:
            redis = self.redis_of()
            statuses = [crawl_status(redis, Keyspace.found(redis, c), pages_per_host=False,
                                     with_history=False)
                        for c in Keyspace.crawl_ids(redis)]
        except Exception:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        memory = redis.info("memory")
        for name, doc, field in (
                ("crawlproj_redis_used_memory_bytes", "Memory the crawls' Redis uses", "used_memory"),
                ("crawlproj_redis_maxmemory_bytes", "The Redis server's maxmemory (0: no limit)",
                 "maxmemory")):
            m = GaugeMetricFamily(name, doc)
            m.add_metric([], int(memory.get(field, 0)))
            yield m
        for name, doc, path in COUNTERS:
            m = CounterMetricFamily(name, doc, labels=["crawl_id"])
            for s in statuses:
                m.add_metric([s["crawl_id"]], _at(s, path))
            yield m
        for name, doc, path in GAUGES:
            m = GaugeMetricFamily(name, doc, labels=["crawl_id"])
            for s in statuses:
                m.add_metric([s["crawl_id"]], _at(s, path))
            yield m
        responses = CounterMetricFamily("crawlproj_responses", "Download attempts by status",
                                        labels=["crawl_id", "status"])
        outcomes = CounterMetricFamily("crawlproj_outcomes", "Download attempts by outcome "
                                       "(Mercator §4, Figure 6)", labels=["crawl_id", "outcome"])
        types = CounterMetricFamily("crawlproj_content_types", "Documents by content type",
                                    labels=["crawl_id", "content_type"])
        hosts = GaugeMetricFamily("crawlproj_hosts", "Frontier hosts by state",
                                  labels=["crawl_id", "state"])
        state = GaugeMetricFamily("crawlproj_crawl_state", "1 for the crawl's state",
                                  labels=["crawl_id", "state"])
        workers = GaugeMetricFamily("crawlproj_workers", "Workers by state",
                                    labels=["crawl_id", "state"])
        rate = GaugeMetricFamily("crawlproj_worker_pages_per_second", "A worker's pages/s",
                                 labels=["crawl_id", "worker"])
        beat = GaugeMetricFamily("crawlproj_worker_heartbeat_age_seconds",
                                 "Seconds since a worker's last heartbeat",
                                 labels=["crawl_id", "worker"])
        errors = CounterMetricFamily("crawlproj_errors", "Download attempts that failed, by "
                                     "kind: dns, tcp, timeout, 4xx, 5xx, robots (excluded)",
                                     labels=["crawl_id", "kind"])
        eta = GaugeMetricFamily("crawlproj_eta_seconds", "Seconds until the crawl ends, as "
                                "estimated (absent when there is no estimate)",
                                labels=["crawl_id"])
        for s in statuses:
            for kind, n in s["errors"].items():
                errors.add_metric([s["crawl_id"], kind], n)
            if s["eta"]["eta_s"] is not None:
                eta.add_metric([s["crawl_id"]], s["eta"]["eta_s"])
        yield errors
        yield eta
        for s in statuses:
            c, f = s["crawl_id"], s["figures"]
            for status, n in f["statuses"].items():
                responses.add_metric([c, status], n)
            for name, n in f["outcomes"].items():
                outcomes.add_metric([c, name], n)
            for name, n in f["content_types"].items():
                types.add_metric([c, name], n)
            for h in HOST_STATES:
                hosts.add_metric([c, h], s["frontier"][f"hosts_{h}"])
            for st in CRAWL_STATES:
                state.add_metric([c, st], 1 if s["state"] == st else 0)
            for st in WORKER_STATES:
                workers.add_metric([c, st], sum(1 for w in s["workers"] if w["state"] == st))
            for w in s["workers"]:
                if w["state"] not in ("gone", "closed"):
                    rate.add_metric([c, w["id"]], w["pages_s"])
                beat.add_metric([c, w["id"]], w["age_s"])
        yield from (responses, outcomes, types, hosts, state, workers, rate, beat)


class Metrics(resource.Resource):
    isLeaf = True

    def __init__(self, service):
        super().__init__()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CrawlCollector(service.redis_for_metrics))

    def render_GET(self, request):
        d = threads.deferToThread(generate_latest, self.registry)

        def done(text):
            request.setHeader(b"content-type", CONTENT_TYPE_LATEST.encode())
            request.write(text)
            request.finish()

        d.addCallback(done)
        return server.NOT_DONE_YET


def add_metrics(app, service) -> None:
    app.route("metrics", Metrics(service))
