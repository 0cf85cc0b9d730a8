"""The address guard in real crawls: redirects from a public page to the
crawler's own machine and network are refused before any connection.

Direct connections: host names map to addresses through tests/resolver.py
(the crawl's TWISTED_DNS_RESOLVER), which answers loopback addresses only.
The public site listens on 127.0.0.2 and is let through by ADDRESS_GUARD_ALLOW;
a listener on 127.0.0.1, same port, stands for everything else: every IP
literal and private name of the cases maps to it, so a request the guard
failed to refuse would land there and be counted, never leave the machine.
Through a proxy: a proxy on loopback that serves every URL itself, and logs
which hosts it was asked for. Each crawl is run once more without the guard
(tests/unguarded_settings.py), the control that shows the case reaches the
listener (or the proxy) when nothing refuses it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.e2e import ROOT, stat
from tests.loopback import QuietHandler, close, serve

pytestmark = pytest.mark.e2e

SECRET = "the-secret-of-this-machine"

# case -> (redirect target, with {port}; the guard's refusal reason)
DIRECT = {
    "loopback": ("http://127.0.0.1:{port}/hit/loopback", "loopback"),
    "metadata": ("http://169.254.169.254:{port}/hit/metadata", "link_local"),
    "ten": ("http://10.1.2.3:{port}/hit/ten", "private"),
    "home": ("http://192.168.1.1:{port}/hit/home", "private"),
    "v6-loopback": ("http://[::1]:{port}/hit/v6-loopback", "loopback"),
    "v6-ula": ("http://[fd00::1]:{port}/hit/v6-ula", "private"),
    "unspecified": ("http://0.0.0.0:{port}/hit/unspecified", "unspecified"),
    "mapped": ("http://[::ffff:127.0.0.1]:{port}/hit/mapped", "loopback"),
    "decimal": ("http://2130706433:{port}/hit/decimal", "loopback"),
    "hex": ("http://0x7f.1:{port}/hit/hex", "loopback"),
    "octal": ("http://017700000001:{port}/hit/octal", "loopback"),
    # a name that resolves to a non-public address
    "name": ("http://inside.test:{port}/hit/name", "loopback"),
    # public to its first lookup (robots.txt, from the public site), then not
    "rebind": ("http://rebind.test:{port}/hit/rebind", "loopback"),
}
LITERALS = ["127.0.0.1", "169.254.169.254", "10.1.2.3", "192.168.1.1", "::1", "fd00::1",
            "0.0.0.0", "::ffff:127.0.0.1", "2130706433", "0x7f.1", "017700000001"]
OTHER_SCHEMES = {"file": "file://{secret_file}", "data": "data:text/html,<p>inline</p>"}


class Listener(ThreadingHTTPServer):
    """Counts every connection it accepts, and the paths asked for."""

    def __init__(self, address):
        self.connections = 0
        self.paths: list[str] = []
        listener = self

        class Handler(QuietHandler):
            def do_GET(self):
                listener.paths.append(self.path)
                self.reply(200, f"<p>{SECRET}</p>".encode())

        super().__init__(address, Handler)

    def get_request(self):
        conn = super().get_request()
        self.connections += 1
        return conn


class PublicSite(ThreadingHTTPServer):
    """The public page: links to /r/<case>, each a redirect to the case's target.
    HTTP/1.0, one request per connection, so every request is a new lookup."""

    def __init__(self, address, targets: dict[str, str]):
        site = self

        class Handler(QuietHandler):
            def do_GET(self):
                case = self.path[len("/r/"):] if self.path.startswith("/r/") else None
                if self.path == "/":
                    self.reply(200, links(site.targets))
                elif case in site.targets:
                    self.reply(302, headers={"Location": site.targets[case]})
                else:
                    self.reply(404, b"not here")

        self.targets = targets
        super().__init__(address, Handler)


def links(cases) -> bytes:
    return ("<html><body>" + "".join(f'<a href="/r/{c}">{c}</a>' for c in cases)
            + "</body></html>").encode()


def two_loopbacks():
    """The listener on 127.0.0.1:P and the public site's address 127.0.0.2:P."""
    for _ in range(20):
        listener = Listener(("127.0.0.1", 0))
        port = listener.server_address[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.2", port))
        except OSError:
            listener.server_close()
            continue
        return listener, port
    raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")


def crawl(tmp_path, redis_url, crawl_id, seed, settings, guarded=True, proxy=None):
    items = tmp_path / f"{crawl_id}.jsonl"
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seed}",
           "-O", f"{items}:jsonlines"]
    for k, v in {"LOG_LEVEL": "INFO", "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": 8,
                 "DOWNLOAD_TIMEOUT": 10, "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0,
                 "TWISTED_DNS_RESOLVER": "tests.resolver.StaticResolver",
                 # a robots.txt that cannot be had is retried this soon (the
                 # control's unbound addresses), not a minute later
                 "ROBOTS_RETRY_WAIT": 0.2, **settings}.items():
        cmd += ["-s", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}
    if proxy:
        env.update(http_proxy=proxy, HTTP_PROXY=proxy)
    if not guarded:
        env["SCRAPY_SETTINGS_MODULE"] = "tests.unguarded_settings"
    env.update(REDIS_URL=redis_url, CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(tmp_path / crawl_id),
               PYTHONUNBUFFERED="1")
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    log = run.stdout + run.stderr
    (tmp_path / f"{crawl_id}.log").write_text(log)
    assert run.returncode == 0, log[-4000:]
    stored = [json.loads(line) for line in items.read_text().splitlines()] if items.exists() else []
    return log, stored, tmp_path / crawl_id


def warc_text(data_dir) -> bytes:
    import gzip

    out = b""
    for path in sorted((data_dir / "warc").glob("*.warc.gz")):
        out += gzip.decompress(path.read_bytes())
    return out


@pytest.fixture
def direct_web(tmp_path):
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    listener, port = two_loopbacks()
    targets = {case: url.format(port=port) for case, (url, _) in DIRECT.items()}
    targets.update({f"scheme-{s}": url.format(secret_file=secret_file)
                    for s, url in OTHER_SCHEMES.items()})
    site = PublicSite(("127.0.0.2", port), targets)
    serve(listener), serve(site)
    resolver_map = {"public.test": ["127.0.0.2"], "inside.test": ["127.0.0.1"],
                    "rebind.test": ["127.0.0.2", "127.0.0.1"],
                    **{literal: ["127.0.0.1"] for literal in LITERALS}}
    settings = {"ADDRESS_GUARD_ALLOW": "127.0.0.2",  # the public site, and nothing else
                "TEST_RESOLVER_MAP": json.dumps(resolver_map)}
    yield listener, f"http://public.test:{port}/", settings
    close(listener), close(site)


@pytest.mark.parametrize("scope", ["any", "host"])
def test_redirects_to_the_machine_and_its_network_are_refused_before_connecting(
        direct_web, tmp_path, redis_url, scope):
    listener, seed, settings = direct_web
    log, stored, data = crawl(tmp_path, redis_url, f"guard-{scope}", seed,
                              {**settings, "CRAWL_SCOPE": scope})
    assert listener.connections == 0, listener.paths
    reasons = {reason for _, reason in DIRECT.values()}
    for reason in reasons:
        assert stat(log, f"addressguard/refused/{reason}") >= 1, reason
    # every case refused: robots.txt and page of each literal, page of the names
    refused = sum(stat(log, f"addressguard/refused/{r}") for r in reasons)
    assert refused >= len(DIRECT)
    assert stat(log, "retry/count") == 0  # a refusal is not retried
    # the public page and its redirects were fetched; nothing from elsewhere stored
    assert [item["url"] for item in stored] == [seed]
    warc = warc_text(data)
    assert SECRET.encode() not in warc  # neither the listener's page nor the local file
    assert b"WARC-Target-URI: file:" not in warc and b"WARC-Target-URI: data:" not in warc
    # logged once per host: the literal 127.0.0.1 is refused for robots.txt and page
    assert log.count("Address guard refused http://127.0.0.1:") == 1


def test_without_the_guard_every_case_reaches_the_listener(direct_web, tmp_path, redis_url):
    """The control: the same crawl without the guard connects to each case."""
    listener, seed, settings = direct_web
    log, stored, data = crawl(tmp_path, redis_url, "unguarded", seed, settings, guarded=False)
    hits = {p.split("/hit/", 1)[1] for p in listener.paths if "/hit/" in p}
    assert hits == set(DIRECT)
    assert SECRET.encode() in warc_text(data)
    # file: and data: redirects are not followed even so: Scrapy's
    # RedirectMiddleware drops other schemes (the guard refuses them as well:
    # tests/test_addressguard.py)
    assert not any(item["url"].startswith(("file:", "data:")) for item in stored)


class Proxy(ThreadingHTTPServer):
    """A forward proxy that serves every absolute-form request itself (it
    connects nowhere) and logs the hosts it was asked for. public.test's
    pages redirect to the cases."""

    def __init__(self, targets: dict[str, str]):
        self.paths: list[str] = []
        proxy = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urlsplit(self.path)
                proxy.paths.append(url.path)
                case = url.path[len("/r/"):] if url.path.startswith("/r/") else None
                if url.hostname == "public.test" and url.path == "/":
                    self.reply(200, links(targets))
                elif url.hostname == "public.test" and case in targets:
                    self.reply(302, headers={"Location": targets[case]})
                elif url.path == "/robots.txt":
                    self.reply(404)
                else:
                    self.reply(200, f"<p>{SECRET}</p>".encode())

        super().__init__(("127.0.0.1", 0), Handler)


PROXIED = {  # case -> (redirect target, the guard's refusal reason)
    "loopback": ("http://127.0.0.1/hit/loopback", "loopback"),
    "v6-loopback": ("http://[::1]/hit/v6-loopback", "loopback"),
    "metadata": ("http://169.254.169.254/latest/meta-data/hit/metadata", "link_local"),
    "ten": ("http://10.1.2.3/hit/ten", "private"),
    "decimal": ("http://2130706433/hit/decimal", "loopback"),
    "localhost": ("http://localhost/hit/localhost", "local_name"),
    "sub-localhost": ("http://admin.localhost/hit/sub-localhost", "local_name"),
    "internal": ("http://metadata.google.internal/hit/internal", "local_name"),
    "mdns": ("http://printer.local/hit/mdns", "local_name"),
    "one-label": ("http://router/hit/one-label", "local_name"),
}


@pytest.fixture
def proxy_web():
    proxy = serve(Proxy({case: url for case, (url, _) in PROXIED.items()}))
    yield proxy, f"http://127.0.0.1:{proxy.server_address[1]}"
    close(proxy)


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "control"])
def test_through_a_proxy_literals_and_local_names_are_refused(proxy_web, tmp_path, redis_url,
                                                              guarded):
    proxy, proxy_url = proxy_web
    log, stored, _ = crawl(tmp_path, redis_url, f"proxy-{guarded}", "http://public.test/",
                           {"TEST_RESOLVER_MAP": json.dumps({"127.0.0.1": ["127.0.0.1"]})},
                           guarded=guarded, proxy=proxy_url)
    hits = {p.split("/hit/", 1)[1] for p in proxy.paths if "/hit/" in p}
    assert "/" in proxy.paths  # the proxy itself is the operator's: let through
    if guarded:
        assert hits == set()
        for _, reason in PROXIED.values():
            assert stat(log, f"addressguard/refused/{reason}") >= 1, reason
    else:
        assert hits == set(PROXIED)
