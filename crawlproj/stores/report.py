"""The crawl's outcome in the terms of Mercator §4 ("Experiences from a Large
Crawl"), computed from the crawl logs:

    Figure 6   outcome of download attempts: 200, 404, 3xx, excluded by
               robots.txt, TCP (network) error, DNS error, other
    Figure 7   content types of the documents downloaded (status 200)
    Figure 8   document sizes over 22 exponential bins: a document of size n
               is in the rightmost bin whose label is not greater than n
               (bins 0, 1, 2, 4, ..., 1M)
    Figure 9   pages (and bytes) over web servers: x servers had at least y
               pages, on log-log axes
    Figure 10  hosts and pages over top-level domains

robots.txt fetches and DNS lookups (Heritrix's ``dns:`` lines), discovery
path P, are prerequisites, not documents: they are counted apart from the
download attempts. A line whose size is '-' (no response: DNS, connection
and robots.txt failures) is an attempt like any other. Heritrix's own
crawl.log reads the same way (crawlproj.stores.crawllog.parse_line).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crawlproj.stores.crawllog import Line
from crawlproj.stores.exchange import (
    S_CONNECT_FAILED,
    S_CONNECT_LOST,
    S_DOMAIN_PREREQUISITE_FAILURE,
    S_DOMAIN_UNRESOLVABLE,
    S_TIMEOUT,
)
from crawlproj.urls import host_of

OUTCOMES = ("200 OK", "404 Not Found", "3xx redirect", "Excluded by robots.txt",
            "TCP error", "DNS error", "Other")
SIZE_BINS = [0] + [1 << k for k in range(21)]  # 0, 1, 2, 4, ... 1M: 22 bins


def outcome(status: int) -> str:
    if status == 200:
        return "200 OK"
    if status == 404:
        return "404 Not Found"
    if 300 <= status < 400:
        return "3xx redirect"
    if status == -9998:
        return "Excluded by robots.txt"
    if status in (S_CONNECT_FAILED, S_CONNECT_LOST, S_TIMEOUT):
        return "TCP error"
    if status in (S_DOMAIN_UNRESOLVABLE, S_DOMAIN_PREREQUISITE_FAILURE):
        return "DNS error"
    return "Other"


def size_bin(n: int) -> int:
    """Index of the rightmost bin whose label is <= n."""
    if n <= 0:
        return 0
    return min(n.bit_length(), len(SIZE_BINS) - 1)


def _label(n: int) -> str:
    if n >= 1 << 20:
        return f"{n >> 20}M"
    if n >= 1 << 10:
        return f"{n >> 10}K"
    return str(n)


def _tld(host: str) -> str:
    """The top-level domain of a server (a host_of key: host and port)."""
    if not host:
        return "?"
    if host[0] == "[":
        return "raw IP addresses"  # IPv6
    last = host.partition(":")[0].rsplit(".", 1)[-1]
    return "raw IP addresses" if last.isdigit() else "." + last


@dataclass
class CrawlReport:
    attempts: int = 0
    robots_fetches: int = 0
    dns_lookups: int = 0
    dns_failures: int = 0
    outcomes: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    documents: int = 0
    document_bytes: int = 0
    content_types: Counter = field(default_factory=Counter)
    sizes: list = field(default_factory=lambda: [0] * len(SIZE_BINS))
    pages_per_host: Counter = field(default_factory=Counter)
    bytes_per_host: Counter = field(default_factory=Counter)
    workers: set = field(default_factory=set)
    # attempts of sitemaps and of the URLs they list (discovery path ending
    # in M, Heritrix's Hop.MANIFEST), and of those, documents
    sitemap_attempts: int = 0
    sitemap_documents: int = 0

    @classmethod
    def from_lines(cls, lines: Iterable[Line]) -> CrawlReport:
        r = cls()
        for line in lines:
            r.workers.add(line.source)
            prerequisite = line.prerequisite
            if prerequisite == "dns":
                r.dns_lookups += 1
                r.dns_failures += line.status <= 0
                continue
            if prerequisite == "robots":
                r.robots_fetches += 1
                continue
            r.attempts += 1
            from_sitemap = line.hops.endswith("M")
            r.sitemap_attempts += from_sitemap
            r.outcomes[outcome(line.status)] += 1
            r.statuses[line.status] += 1
            if line.status == 200:
                host = host_of(line.url)  # the server, as the frontier was polite to it
                r.documents += 1
                r.sitemap_documents += from_sitemap
                size = line.size or 0
                r.document_bytes += size
                r.content_types[line.mime] += 1
                r.sizes[size_bin(size)] += 1
                r.pages_per_host[host] += 1
                r.bytes_per_host[host] += size
        return r

    # -- figures as data -------------------------------------------------------

    def servers_with_at_least(self, per_host: Counter) -> list[tuple[int, int]]:
        """Figure 9: (y, x) = x servers had at least y (pages or bytes), y in powers of 10."""
        if not per_host:
            return []
        top = max(per_host.values())
        out, y = [], 1
        while y <= top:
            out.append((y, sum(1 for v in per_host.values() if v >= y)))
            y *= 10
        return out

    def tlds(self) -> tuple[Counter, Counter]:
        hosts, pages = Counter(), Counter()
        for host, n in self.pages_per_host.items():
            hosts[_tld(host)] += 1
            pages[_tld(host)] += n
        return hosts, pages

    # -- text ------------------------------------------------------------------

    def text(self, top: int = 10) -> str:
        def pct(n, d):
            return f"{100.0 * n / d:6.2f}%" if d else "      -"

        out = [f"Crawl report (Mercator §4): {self.attempts} download attempts by "
               f"{len(self.workers)} worker(s), plus {self.robots_fetches} robots.txt fetches"
               + (f" and {self.dns_lookups} DNS lookups ({self.dns_failures} failed)"
                  if self.dns_lookups else ""),
               f"URLs from sitemaps (discovery path M): {self.sitemap_attempts} attempts, "
               f"{self.sitemap_documents} documents",
               "", "Outcome of download attempts (Figure 6)"]
        for name in OUTCOMES:
            out.append(f"  {name:<24} {self.outcomes[name]:>10}  {pct(self.outcomes[name], self.attempts)}")
        other = sorted((s, n) for s, n in self.statuses.items() if outcome(s) == "Other")
        if other:
            out.append("    other: " + ", ".join(f"{s}: {n}" for s, n in other))
        out += ["", f"Documents fetched (status 200): {self.documents}, "
                    f"{self.document_bytes} bytes, {len(self.pages_per_host)} hosts", "",
                "Content types of documents (Figure 7)"]
        shown = self.content_types.most_common(top)
        for mime, n in shown:
            out.append(f"  {mime:<24} {n:>10}  {pct(n, self.documents)}")
        rest = self.documents - sum(n for _, n in shown)
        if rest:
            out.append(f"  {'Other':<24} {rest:>10}  {pct(rest, self.documents)}")
        out += ["", "Document sizes (Figure 8): bin = largest label <= size, bytes"]
        peak = max(self.sizes) or 1
        for label, n in zip(SIZE_BINS, self.sizes):
            out.append(f"  {_label(label):>5} {n:>10}  {'#' * round(40 * n / peak)}")
        out += ["", "Pages per host (Figure 9a): x hosts had at least y pages"]
        for y, x in self.servers_with_at_least(self.pages_per_host):
            out.append(f"  at least {y:>10} pages: {x:>8} hosts")
        out += ["", "Bytes per host (Figure 9b): x hosts had at least y bytes"]
        for y, x in self.servers_with_at_least(self.bytes_per_host):
            out.append(f"  at least {y:>10} bytes: {x:>8} hosts")
        hosts, pages = self.tlds()
        out += ["", "Top-level domains (Figure 10): hosts, pages"]
        for tld, n in pages.most_common(top):
            out.append(f"  {tld:<18} {hosts[tld]:>8} hosts {pct(hosts[tld], len(self.pages_per_host))}"
                       f" {n:>10} pages {pct(n, self.documents)}")
        out += ["", "Largest hosts (pages)"]
        for host, n in self.pages_per_host.most_common(top):
            out.append(f"  {host:<40} {n:>8}")
        return "\n".join(out) + "\n"

    # -- charts ----------------------------------------------------------------

    def charts(self, directory: str | Path) -> list[Path]:
        """PNG charts of Figures 6-9 into directory; returns their paths."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        paths = []

        def save(fig, name):
            path = d / name
            fig.tight_layout()
            fig.savefig(path, dpi=100)
            plt.close(fig)
            paths.append(path)

        fig, ax = plt.subplots(figsize=(7, 4))
        values = [self.outcomes[o] for o in OUTCOMES]
        ax.barh(list(OUTCOMES)[::-1], values[::-1], color="tab:blue")
        for i, v in enumerate(values[::-1]):
            ax.text(v, i, f" {100.0 * v / self.attempts:.2f}%" if self.attempts else "", va="center")
        ax.set_title("Outcome of download attempts")
        ax.set_xlabel("attempts")
        save(fig, "outcomes.png")

        fig, ax = plt.subplots(figsize=(7, 4))
        shown = self.content_types.most_common(8)
        labels = [m for m, _ in shown]
        counts = [n for _, n in shown]
        rest = self.documents - sum(counts)
        if rest:
            labels.append("Other")
            counts.append(rest)
        ax.barh(labels[::-1], counts[::-1], color="tab:green")
        ax.set_title("Content types of documents (status 200)")
        ax.set_xlabel("documents")
        save(fig, "content_types.png")

        fig, ax = plt.subplots(figsize=(9, 4))
        ax.bar(range(len(SIZE_BINS)), self.sizes, color="tab:orange")
        ax.set_xticks(range(len(SIZE_BINS)), [_label(b) for b in SIZE_BINS], rotation=60)
        ax.set_title("Distribution of document sizes (bytes)")
        ax.set_ylabel("documents")
        save(fig, "document_sizes.png")

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, per_host, what in ((axes[0], self.pages_per_host, "pages"),
                                   (axes[1], self.bytes_per_host, "bytes")):
            values = sorted(per_host.values(), reverse=True)
            if values:
                # point (x, y): x servers had at least y pages/bytes
                ax.loglog(range(1, len(values) + 1), values, marker=".", linestyle="none")
            ax.set_xlabel("web servers")
            ax.set_ylabel(f"{what} (at least)")
            ax.set_title(f"Distribution of {what} over web servers")
        save(fig, "per_host.png")
        return paths
