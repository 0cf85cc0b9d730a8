"""The dashboard routes: /dashboard, GET /api/status, POST /api/control.

    GET  /dashboard[?crawl=ID]      the page; its script (static/dashboard.js)
                                    reads /api/status every 2 s and redraws,
                                    its charts from the crawl's history
    GET  /api/status[?crawl=ID][&span=S][&since=MS]
                                    crawlproj/monitor/status.py's document,
                                    with the crawl's history of the last S
                                    seconds (default: the whole crawl), its
                                    samples newer than server time MS
         -> 400 {"error"} for a span or since that is not a number,
            404 {"error"} for a crawl id that names no crawl,
            503 {"error", "redis": "unreachable"} while Redis cannot be read
    POST /api/control               {"crawl": ID, "action": "pause"|"resume"|"stop"}
         -> 200 {"crawl", "action", "at_ms"}; 400 for a bad body; 401 without
            the token the app asks for (UI_TOKEN; always beyond loopback, where
            control is refused until one is set: 403); 415 unless the body is
            sent as application/json

A page of another site cannot send control: a cross-origin POST of JSON needs
a CORS preflight this app never answers, and a request whose Origin is not
this app's is refused. Redis is read off the reactor thread; a client that
failed is made again on the next request, so the page recovers by itself
once the server is back.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import time
from importlib.resources import files

from twisted.internet import threads
from twisted.web import resource, server

from crawlproj.errors import CrawlprojError
from crawlproj.monitor import control, hosts
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace, NoSuchCrawl
from crawlproj.ui.app import send_json, template

CSP = (b"default-src 'none'; script-src 'self'; connect-src 'self'; "
       b"style-src 'self' 'unsafe-inline'; img-src 'self'; form-action 'none'; "
       b"frame-ancestors 'none'; base-uri 'none'")
STATIC = {"dashboard.js": b"text/javascript; charset=utf-8",
          "charts.js": b"text/javascript; charset=utf-8",
          "hosts.js": b"text/javascript; charset=utf-8",
          "host.js": b"text/javascript; charset=utf-8",
          "dashboard.css": b"text/css; charset=utf-8",
          "favicon.svg": b"image/svg+xml"}
# Pages per host reads every host's count: once in this many seconds per crawl.
PAGES_PER_HOST_EVERY = 30.0


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


class StatusService:
    """The crawl's status for the app: one Redis client, made again after a failure."""

    def __init__(self, settings, crawl_id: str, token: str | None, loopback: bool):
        self.settings = settings
        self.crawl_id = crawl_id
        self.token = token
        self.loopback = loopback
        self._redis = None
        self._per_host: dict[str, tuple[float, list]] = {}

    def redis(self):
        if self._redis is None:
            self._redis = get_redis(self.settings)
        return self._redis

    def _failed(self):
        self._redis = None

    def redis_for_metrics(self):
        """redis(), checked with a PING (a client kept from before an outage
        says so here, and is made again on the next scrape)."""
        try:
            redis = self.redis()
            redis.ping()
            return redis
        except Exception:
            self._failed()
            raise

    def status(self, crawl_id: str, span: float | None = None, since: int = 0) -> dict:
        """In a thread. NoSuchCrawl, or CrawlprojError/redis errors when unreachable."""
        try:
            redis = self.redis()
            keyspace = Keyspace.found(redis, crawl_id)
            cached = self._per_host.get(crawl_id)
            fresh = cached is None or time.monotonic() - cached[0] > PAGES_PER_HOST_EVERY
            s = crawl_status(redis, keyspace, pages_per_host=fresh, history_span=span,
                             history_since=since)
        except NoSuchCrawl:
            raise
        except Exception:
            self._failed()
            raise
        if fresh:
            self._per_host[crawl_id] = (time.monotonic(), s["figures"]["pages_per_host"])
        else:
            s["figures"]["pages_per_host"] = cached[1]
        s["access"] = {"control": self.control_allowed(), "token_required": self.token_required()}
        return s

    def hosts(self, crawl_id: str, sort: str, search: str, n: int, offset: int) -> dict:
        """crawlproj/monitor/hosts.py's list, in a thread (errors as status())."""
        return self._with(crawl_id, lambda redis, ks: hosts.hosts(
            redis, ks, self.settings, sort, search, n, offset))

    def host(self, crawl_id: str, name: str) -> dict:
        """One host's story (hosts.host), in a thread: NoSuchHost, BadHostName too."""
        return self._with(crawl_id, lambda redis, ks: hosts.host(
            redis, ks, name, self.settings, hosts.log_dirs(redis, ks, self.settings)))

    def _with(self, crawl_id: str, work):
        try:
            redis = self.redis()
            return work(redis, Keyspace.found(redis, crawl_id))
        except (NoSuchCrawl, hosts.NoSuchHost, hosts.BadRequest):
            raise
        except Exception:
            self._failed()
            raise

    def control(self, crawl_id: str, action: str) -> int:
        try:
            redis = self.redis()
            return control.control(redis, Keyspace.found(redis, crawl_id), action)
        except NoSuchCrawl:
            raise
        except Exception:
            self._failed()
            raise

    def token_required(self) -> bool:
        return bool(self.token) or not self.loopback

    def control_allowed(self) -> bool:
        return self.loopback or bool(self.token)

    def authorised(self, header: bytes | None) -> bool:
        if not self.token_required():
            return True
        if not self.token or not header or not header.startswith(b"Bearer "):
            return False
        return hmac.compare_digest(header[7:].strip(), self.token.encode())


def _crawl(request, service: StatusService) -> str:
    values = request.args.get(b"crawl")
    return values[0].decode("utf-8", "replace") if values and values[0] else service.crawl_id


def _answer(request, work, *args):
    """Run work(*args) off the reactor thread and answer with its document:
    404 for a crawl id that names no crawl or a host it does not know, 400
    for a bad argument, 503 while Redis cannot be read."""
    def done(body):
        request.write(send_json(request, 200, body))
        request.finish()

    def failed(failure):
        exc = failure.value
        if isinstance(exc, (NoSuchCrawl, hosts.NoSuchHost)):
            request.write(send_json(request, 404, {"error": str(exc)}))
        elif isinstance(exc, hosts.BadRequest):
            request.write(send_json(request, 400, {"error": str(exc)}))
        else:
            request.write(send_json(request, 503, {"error": f"Redis unreachable: {exc}",
                                                   "redis": "unreachable"}))
        request.finish()

    threads.deferToThread(work, *args).addCallbacks(done, failed)
    return server.NOT_DONE_YET


def arg(request, name: str) -> str:
    """A query argument as text ('' when absent)."""
    values = request.args.get(name.encode())
    return values[0].decode("utf-8", "replace") if values else ""


def number(request, name: str, default, kind=float, least=0):
    """A query argument as a number of at least `least`; ValueError names it."""
    text = arg(request, name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text[:40]!r}") from None
    if not value >= least or value == float("inf"):
        raise ValueError(f"{name} must be {least} or more, not {text[:40]!r}")
    return value


class ApiStatus(resource.Resource):
    isLeaf = True

    def __init__(self, service: StatusService):
        super().__init__()
        self.service = service

    def render_GET(self, request):
        try:
            span = number(request, "span", None, float, 1)
            since = number(request, "since", 0, int)
        except ValueError as exc:
            return send_json(request, 400, {"error": str(exc)})
        return _answer(request, self.service.status, _crawl(request, self.service), span, since)


class ApiControl(resource.Resource):
    isLeaf = True

    def __init__(self, service: StatusService):
        super().__init__()
        self.service = service

    def render_POST(self, request):
        ctype = (request.getHeader(b"content-type") or b"").split(b";")[0].strip().lower()
        if ctype != b"application/json":
            return send_json(request, 415, {"error": "send the body as application/json"})
        origin = request.getHeader(b"origin")
        host = request.getHeader(b"host")
        if origin is not None and host is not None and origin not in (
                b"http://" + host, b"https://" + host):
            return send_json(request, 403, {"error": "control from another site is refused"})
        if not self.service.control_allowed():
            return send_json(request, 403, {
                "error": "the app listens beyond loopback: control needs UI_TOKEN set"})
        if not self.service.authorised(request.getHeader(b"authorization")):
            request.setHeader(b"www-authenticate", b'Bearer realm="crawlproj"')
            return send_json(request, 401, {"error": "control needs the app's token (UI_TOKEN)"})
        try:
            body = json.loads(request.content.read(10_000) or b"{}")
            action = body.get("action")
            crawl_id = body.get("crawl") or self.service.crawl_id
            if action not in control.COMMANDS or not isinstance(crawl_id, str):
                raise ValueError
        except (ValueError, AttributeError):
            return send_json(request, 400, {
                "error": f"the body must be {{\"crawl\": ID, \"action\": one of "
                         f"{', '.join(control.COMMANDS)}}}"})
        return _answer(request, lambda: {"crawl": crawl_id, "action": action,
                                         "at_ms": self.service.control(crawl_id, action)})


class Page(resource.Resource):
    """A page of the app: a template whose script (this app's only) does the rest."""

    isLeaf = True

    def __init__(self, name: str):
        super().__init__()
        self.page = template(name).encode()

    def render_GET(self, request):
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"content-security-policy", CSP)
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"cache-control", b"no-store")
        return self.page


class Static(resource.Resource):
    """The dashboard's script and style, shipped in the package."""

    def getChild(self, name, request):
        return StaticFile(name.decode("utf-8", "replace"))


class StaticFile(resource.Resource):
    isLeaf = True

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def render_GET(self, request):
        ctype = STATIC.get(self.name)
        if ctype is None or request.postpath:
            return send_json(request, 404, {"error": "no such page"})
        request.setHeader(b"content-type", ctype)
        request.setHeader(b"x-content-type-options", b"nosniff")
        return files("crawlproj.ui").joinpath("static", self.name).read_bytes()


def add_dashboard(app, service: StatusService) -> None:
    app.route("dashboard", Page("dashboard.html"))
    app.route("api/status", ApiStatus(service))
    app.route("api/control", ApiControl(service))
    app.route("static", Static())


def check_token(token) -> None:
    """UI_TOKEN, if set, must be a usable secret (beyond loopback without
    one, the app starts with control off)."""
    if token is None:
        return
    if not isinstance(token, str) or not token.strip():
        raise CrawlprojError("UI_TOKEN must not be empty (unset it for no token)")
