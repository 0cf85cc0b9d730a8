"""A host name resolver for crawls in tests: names map to loopback addresses.

TWISTED_DNS_RESOLVER = "tests.resolver.StaticResolver", with the map in the
setting TEST_RESOLVER_MAP (JSON): name or IP literal -> list of addresses.
The first lookup of a name answers the list's first address, the next one
the second, and so on, the last one every later lookup (a name that changes
its answer: DNS rebinding). A name not in the map resolves to nothing. No
lookup leaves the process, and every answer is a loopback address: a test
that goes wrong still contacts nothing else. Twisted's HostnameEndpoint asks
this resolver for IP literals too, so a URL naming 10.1.2.3 connects, when
nothing refuses it, to the loopback address the map gives for "10.1.2.3".
"""

from __future__ import annotations

import ipaddress
import json
from collections import Counter

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver, IHostResolution
from zope.interface import implementer


def _key(name: str) -> str:
    """One spelling per name: an IP literal in its standard form
    (::ffff:127.0.0.1 is ::ffff:7f00:1, as a URL parser writes it)."""
    name = name.strip("[]").lower()
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str):
        self.name = name

    def cancel(self) -> None:
        pass


@implementer(IHostnameResolver)
class StaticResolver:
    def __init__(self, reactor, mapping: dict[str, list[str]]):
        self.reactor = reactor
        self.mapping = {}
        for name, answers in mapping.items():
            for a in answers:
                if not ipaddress.ip_address(a).is_loopback:
                    raise ValueError(f"TEST_RESOLVER_MAP: {name} -> {a} is not a loopback address")
            self.mapping[_key(name)] = list(answers)
        self.lookups: Counter = Counter()

    @classmethod
    def from_crawler(cls, crawler, reactor):
        return cls(reactor, json.loads(crawler.settings.get("TEST_RESOLVER_MAP") or "{}"))

    def install_on_reactor(self) -> None:
        self.reactor.installNameResolver(self)

    def resolveHostName(self, resolutionReceiver, hostName, portNumber=0, addressTypes=None,
                        transportSemantics="TCP"):
        key = _key(hostName)
        answers = self.mapping.get(key, [])
        n = self.lookups[key]
        self.lookups[key] += 1
        resolution = _Resolution(hostName)
        resolutionReceiver.resolutionBegan(resolution)
        if answers:
            address = answers[min(n, len(answers) - 1)]
            kind = IPv6Address if ":" in address else IPv4Address
            resolutionReceiver.addressResolved(kind("TCP", address, portNumber))
        resolutionReceiver.resolutionComplete()
        return resolution
