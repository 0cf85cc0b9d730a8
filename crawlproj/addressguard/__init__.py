"""The address guard: which hosts and addresses a crawler may contact.

A crawler follows what pages say, and pages (or their redirects) may point at
the machine the crawler runs on, its network, or a cloud's metadata service
(169.254.169.254). Only public addresses are contacted, unless the operator
lets a network or a host name through (ADDRESS_GUARD_ALLOW).

Two places check, so that the address checked is the address connected to:

- :class:`GuardResolver`, the reactor's host name resolver, wraps the one the
  process installed (Scrapy's TWISTED_DNS_RESOLVER) and drops every answer
  that is not public. Scrapy's HTTP/1.1 handler connects through Twisted's
  HostnameEndpoint, which asks this resolver for every host, IP literals
  included, and connects to the addresses it hears, never resolving again:
  a name that answers a public address to one lookup and a private one to the
  next (DNS rebinding) is checked at each connection.
- middleware.py (AddressGuardMiddleware; middlewares/addressguard.py is its
  entry point in the settings) checks every request before it is downloaded:
  the scheme (http and https only), the host as the WHATWG URL Standard reads
  it (``http://2130706433/``, ``http://0x7f.1/`` are 127.0.0.1 there, as in
  a browser or a proxy), and names that are local by definition. Through a
  proxy, that is all that can be checked: the proxy resolves the name.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections import OrderedDict

from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from zope.interface import implementer

from crawlproj.errors import CrawlprojError

logger = logging.getLogger(__name__)


class AddressGuardError(CrawlprojError):
    """The guard cannot work with these settings; the message is one line."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and its
# updates), by the reason a refusal is counted under. The first match wins.
_IPV4 = [(_V4(net), reason) for net, reason in (
    ("0.0.0.0/8", "unspecified"),        # "this network"; 0.0.0.0 reaches the local host
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),           # RFC 1918
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "cgnat"),          # RFC 6598, shared address space
    ("169.254.0.0/16", "link_local"),    # RFC 3927; cloud metadata services
    ("224.0.0.0/4", "multicast"),
    ("192.0.0.0/24", "reserved"),        # IETF protocol assignments
    ("192.0.2.0/24", "reserved"),        # documentation (RFC 5737)
    ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"),
    ("198.18.0.0/15", "reserved"),       # benchmarking (RFC 2544)
    ("192.88.99.0/24", "reserved"),      # 6to4 relay anycast (deprecated)
    ("240.0.0.0/4", "reserved"),         # future use, and 255.255.255.255
)]
_IPV6 = [(_V6(net), reason) for net, reason in (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "private"),       # local-use NAT64 (RFC 8215)
    ("fc00::/7", "private"),             # unique local (RFC 4193)
    ("fec0::/10", "private"),            # site-local (deprecated, RFC 3879)
    ("fe80::/10", "link_local"),
    ("ff00::/8", "multicast"),
    ("100::/64", "reserved"),            # discard (RFC 6666)
    ("2001::/32", "reserved"),           # Teredo: the IPv4 end is hidden
    ("2001:2::/48", "reserved"),         # benchmarking
    ("2001:10::/28", "reserved"),        # ORCHID
    ("2001:20::/28", "reserved"),        # ORCHIDv2
    ("2001:db8::/32", "reserved"),       # documentation
    ("3fff::/20", "reserved"),           # documentation (RFC 9637)
)]
# Addresses that carry an IPv4 address: the IPv4 address is the one reached.
_MAPPED = _V6("::ffff:0:0/96")          # IPv4-mapped
_NAT64 = _V6("64:ff9b::/96")            # the NAT64 well-known prefix (RFC 6052)
_COMPAT = _V6("::/96")                   # IPv4-compatible (deprecated)
_SIXTOFOUR = _V6("2002::/16")            # 6to4 (RFC 3056)
_GLOBAL_UNICAST = _V6("2000::/3")

# Names that are local by definition, refused through a proxy (whose resolver
# would answer them from the proxy's own network) and directly alike:
# localhost and *.localhost (RFC 6761 §6.3: the loopback address), *.local
# (multicast DNS on the local link, RFC 6762), *.home.arpa (home networks,
# RFC 8375), *.internal (ICANN's top-level domain for private use, 2024), and
# *.localdomain (the name /etc/hosts gives localhost). A name of one label
# ("intranet", "router") is completed by the resolver's search domains, inside
# the network. The reserved names of RFC 2606 and RFC 6761 that mean nothing
# locally pass: .test and .example (documentation and testing: no public DNS
# answers them, so only a proxy an operator set up serves them, as the
# simulated web does), .invalid (never resolves), and .onion (RFC 7686, Tor).
LOCAL_SUFFIXES = ("localhost", "local", "home.arpa", "internal", "localdomain")


def classify(address) -> str | None:
    """The reason address (str or ipaddress object) is not public, or None.

    IPv4-mapped, NAT64 (64:ff9b::/96), IPv4-compatible and 6to4 addresses are
    judged by the IPv4 address they carry."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 6:
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        v4 = _embedded_ipv4(ip)
        if v4 is not None:
            return classify(v4)
        for net, reason in _IPV6:
            if ip in net:
                return reason
        return None if ip in _GLOBAL_UNICAST else "reserved"
    for net, reason in _IPV4:
        if ip in net:
            return reason
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in _MAPPED or ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _COMPAT and int(ip) > 1:  # not :: nor ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIXTOFOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
    return None


def ip_literal(host: str):
    """host as an ipaddress object, or None if it is a name. Brackets and an
    IPv6 zone are allowed."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def local_name(host: str) -> bool:
    """Whether host (a name, not an address) is local by definition."""
    host = host.rstrip(".").lower()
    if "." not in host:
        return True
    return any(host == s or host.endswith("." + s) for s in LOCAL_SUFFIXES)


class AllowList:
    """ADDRESS_GUARD_ALLOW: networks (CIDRs or single addresses) and host
    names let through. A name lets through itself and its subdomains, as in
    no_proxy: ``example`` lets h1.example through."""

    def __init__(self, entries):
        self.networks: list = []
        self.names: list[str] = []
        for entry in entries:
            entry = entry.strip()
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = entry.strip(".").lower()
            if name.startswith("*."):
                name = name[2:]
            if not name or not re.fullmatch(r"[a-z0-9._-]+", name):
                raise AddressGuardError(f"ADDRESS_GUARD_ALLOW: {entry!r} is neither a network "
                                        "(CIDR or address) nor a host name")
            self.names.append(name)

    @classmethod
    def from_settings(cls, settings) -> AllowList:
        # a list, or a string of entries separated by commas or spaces
        return cls(part for entry in settings.getlist("ADDRESS_GUARD_ALLOW")
                   for part in re.split(r"[,\s]+", str(entry)))

    def __bool__(self) -> bool:
        return bool(self.networks or self.names)

    def name(self, host: str) -> bool:
        host = host.strip("[]").rstrip(".").lower()
        return any(host == n or host.endswith("." + n) for n in self.names)

    def address(self, ip) -> bool:
        forms = [ip]
        if ip.version == 6:
            v4 = _embedded_ipv4(ip)
            if v4 is not None:
                forms.append(v4)
        return any(f in net for f in forms for net in self.networks if net.version == f.version)


class Policy:
    """What may be contacted: public addresses, and what the allow list names."""

    def __init__(self, allow: AllowList):
        self.allow = allow

    def address(self, address) -> str | None:
        """The refusal reason for an address, or None when it may be contacted."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        if self.allow.address(ip):
            return None
        return classify(ip)

    def host(self, host: str) -> str | None:
        """The refusal reason for a URL's host (a name or an IP literal) before
        any lookup, or None. A name that passes may still resolve to an
        address the resolver refuses."""
        if not host:
            return "invalid_host"
        if self.allow.name(host):
            return None
        ip = ip_literal(host)
        if ip is not None:
            return self.address(ip)
        return "local_name" if local_name(host) else None


# Download handlers that connect through the reactor's host name resolver
# (Twisted's HostnameEndpoint), where the guard checks the address connected.
_RESOLVING_HANDLERS = ("scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",)


def guarded_handlers(settings) -> list[str]:
    """The schemes of http and https that have a download handler; raise
    AddressGuardError if one of those handlers connects in a way the guard
    cannot see (Scrapy's aiohttp or httpx handlers resolve names themselves)."""
    from scrapy.utils.misc import load_object

    handlers = {**settings.getdict("DOWNLOAD_HANDLERS_BASE"),
                **settings.getdict("DOWNLOAD_HANDLERS")}
    schemes = []
    for scheme in ("http", "https"):
        handler = handlers.get(scheme)
        if not handler:
            continue
        cls = handler if isinstance(handler, type) else load_object(handler)
        if not any(issubclass(cls, load_object(h)) for h in _RESOLVING_HANDLERS):
            raise AddressGuardError(
                f"the address guard cannot check the addresses {cls.__name__} connects to "
                f"(DOWNLOAD_HANDLERS[{scheme!r}]): use Scrapy's HTTP11DownloadHandler, or "
                "switch the guard off (docs/hardening.md)")
        schemes.append(scheme)
    return schemes


class _Refusals:
    """The names the resolver refused lately, with the reason, for the
    downloader middleware to turn a failed connection into a refusal."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._reasons: OrderedDict[str, str] = OrderedDict()

    def add(self, name: str, reason: str) -> None:
        self._reasons[name] = reason
        self._reasons.move_to_end(name)
        while len(self._reasons) > self.size:
            self._reasons.popitem(last=False)

    def pop(self, name: str) -> str | None:
        return self._reasons.pop(name, None)


def resolver_key(name: str) -> str:
    return name.strip("[]").rstrip(".").lower()


@implementer(IHostnameResolver)
class GuardResolver:
    """The reactor's host name resolver, wrapping the one installed before:
    answers that the policy refuses are dropped, so nothing connects to them.
    A name whose every answer was dropped fails to connect as if it did not
    resolve; the refusal is kept for the middleware to report.

    The proxies requests name are trusted by (name, port): the operator chose
    them (CRAWL_PROXY, the environment, a spider's meta['proxy']), and the
    simulated web is one on 127.0.0.1."""

    def __init__(self, inner: IHostnameResolver, policy: Policy):
        self.inner = inner
        self.policy = policy
        self.proxies: set[tuple[str, int]] = set()
        self.refusals = _Refusals()

    @classmethod
    def install(cls, reactor, policy: Policy) -> GuardResolver:
        """Wrap the reactor's resolver, unless a guard with this policy's
        allow list already does (a second crawler of the process)."""
        current = reactor.nameResolver
        if isinstance(current, cls) and current.policy.allow.__dict__ == policy.allow.__dict__:
            return current
        guard = cls(current, policy)
        reactor.installNameResolver(guard)
        return guard

    def trust_proxy(self, host: str, port: int) -> None:
        self.proxies.add((resolver_key(host), port))

    def resolveHostName(self, resolutionReceiver, hostName, portNumber=0,
                        addressTypes=None, transportSemantics="TCP"):
        key = resolver_key(hostName)
        if (key, portNumber) in self.proxies or self.policy.allow.name(key):
            receiver = resolutionReceiver
        else:
            receiver = _GuardedReceiver(resolutionReceiver, key, self)
        return self.inner.resolveHostName(receiver, hostName, portNumber, addressTypes,
                                          transportSemantics)


@implementer(IResolutionReceiver)
class _GuardedReceiver:
    def __init__(self, receiver, name: str, guard: GuardResolver):
        self.receiver, self.name, self.guard = receiver, name, guard
        self.passed = 0
        self.reason: str | None = None

    def resolutionBegan(self, resolution) -> None:
        self.receiver.resolutionBegan(resolution)

    def addressResolved(self, address) -> None:
        try:
            reason = self.guard.policy.address(address.host)
        except (AttributeError, ValueError):
            reason = "unresolvable"  # not an IP address: nothing to check, nothing to pass
        if reason is None:
            self.passed += 1
            self.receiver.addressResolved(address)
        else:
            self.reason = self.reason or reason

    def resolutionComplete(self) -> None:
        if not self.passed and self.reason:
            self.guard.refusals.add(self.name, self.reason)
        self.receiver.resolutionComplete()
