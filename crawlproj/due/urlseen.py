"""The URL-seen test of one crawl: configuration, fingerprints, batched checks.

Mercator's DUE (§3.2) answers "has this URL been seen?" for every extracted
link. Here the answer lives in Redis, in each frontier partition
(lua/seen.lua), so that the frontier can test and enqueue in one atomic script
(frontier/lua/sync.lua); this class is the Python half:

* the crawl's DUE configuration (mode, fingerprint bits, bucket load, bloom
  capacity and rate, the parameters canonicalisation strips). Like the
  frontier's partition count, the first worker of a crawl fixes it in the
  crawl's meta hash and later workers adopt it: two workers that
  canonicalised or fingerprinted differently would each let the other's
  URLs through.
* the two fields a URL contributes to a seen test: its fingerprint and the
  mode's ``aux`` field (see :meth:`aux`);
* :meth:`check`: the test (and set) for batches of fingerprints, one script
  call per partition, all partitions in one pipelined round trip.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import mmh3
from redis.exceptions import NoScriptError

from crawlproj.due import bloom
from crawlproj.due.canonical import STRIP_PARAMS, STRIP_PREFIXES, Canonicalizer
from crawlproj.due.fingerprint import BITS, fingerprint
from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import lua_script
from crawlproj.redis.keyspace import Keyspace

logger = logging.getLogger(__name__)

#: The DUE's Lua functions; scripts that test URLs are prepended with it.
SEEN_LUA = lua_script("crawlproj.due", "seen.lua")
CHECK_LUA = SEEN_LUA + lua_script("crawlproj.due", "check.lua")

MODES = ("exact", "bloom")
# Seeds of the hashes that derive the bloom mode's positions from a fingerprint,
# and how many 16-byte hashes make one aux field: 4 + 2 x bloom.MAX_K bytes.
_BLOOM_SEED = 0xD0E5EED
_BLOOM_WORDS = -(-(4 + 2 * bloom.MAX_K) // 16)
# Redis's and Valkey's defaults of the settings that keep a set compact, assumed
# where CONFIG GET is refused; and the limit / load ratio that keeps every
# bucket of the linear hash table within the limit (they hold up to ~2 x load).
DEFAULT_LIMITS = {"set-max-intset-entries": 512, "set-max-listpack-entries": 128}
HEADROOM = 2.5
# Fingerprints per script call of URLSeen.check. Redis keeps a call's ARGV in
# the scripts' heap until the next call, and Redis 7.4+ counts that heap in
# used_memory: about 80 bytes per fingerprint of the last call (0.24 bytes
# per URL at 1M URLs with 2,000, 1.03 with 10,000: docs/due.md). The calls
# all go in one pipelined round trip, so smaller calls cost no round trips.
CALL_SIZE = 2_000


class DueConfigError(CrawlprojError, ValueError):
    """A DUE setting out of its range; the message is one line."""


@dataclass(frozen=True)
class DueConfig:
    """One crawl's DUE settings (settings/base.py, "The DUE")."""

    mode: str = "exact"
    bits: int = 64
    load: int | None = None        # exact: mean fingerprints per bucket before a split, at
                                   # most (None: 1024 for 64-bit intsets, 48 for 128-bit
                                   # listpacks); lowered to the server's limit / 2.5 where
                                   # the crawl runs (URLSeen.fitted_load)
    capacity: int | None = None    # bloom: URLs of the whole crawl the first layer holds;
                                   # None: a growing filter (crawlproj.due.bloom)
    error_rate: float = 1e-7       # bloom: false-positive rate (up to the capacity if set)
    strip_params: tuple = field(default=STRIP_PARAMS)
    strip_prefixes: tuple = field(default=STRIP_PREFIXES)

    def __post_init__(self):
        if self.load is None:
            object.__setattr__(self, "load", 1024 if self.bits == 64 else 48)
        object.__setattr__(self, "strip_params", tuple(p.lower() for p in self.strip_params))
        object.__setattr__(self, "strip_prefixes", tuple(p.lower() for p in self.strip_prefixes))
        if self.mode not in MODES:
            raise DueConfigError(f"DUE_MODE must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.bits not in BITS:
            raise DueConfigError(f"DUE_FINGERPRINT_BITS must be 64 or 128, not {self.bits!r}")
        if not (isinstance(self.load, int) and 1 <= self.load <= 1 << 20):
            raise DueConfigError(f"DUE_BUCKET_LOAD must be an integer in [1, 2^20], "
                                 f"not {self.load!r}")
        try:
            bloom.check(self.capacity, self.error_rate)
        except ValueError as exc:
            raise DueConfigError(str(exc)) from None

    @classmethod
    def from_settings(cls, settings) -> DueConfig:
        # unset: derived (the bucket load from the bits, in __post_init__) or
        # the built-in lists of crawlproj.due.canonical
        params = settings.get("DUE_STRIP_PARAMS")
        prefixes = settings.get("DUE_STRIP_PARAM_PREFIXES")
        return cls(
            mode=str(settings.get("DUE_MODE")).strip().lower(),
            bits=settings.getint("DUE_FINGERPRINT_BITS"),
            load=_whole_or_none(settings, "DUE_BUCKET_LOAD"),
            capacity=_whole_or_none(settings, "DUE_BLOOM_CAPACITY"),
            error_rate=settings.getfloat("DUE_BLOOM_ERROR_RATE"),
            strip_params=STRIP_PARAMS if params is None
            else tuple(settings.getlist("DUE_STRIP_PARAMS")),
            strip_prefixes=STRIP_PREFIXES if prefixes is None
            else tuple(settings.getlist("DUE_STRIP_PARAM_PREFIXES")),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> DueConfig:
        d = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def _whole_or_none(settings, name: str) -> int | None:
    """A setting whose default is None (so the settings table checks no kind)
    read as a whole number; another value is refused in one line."""
    if settings.get(name) is None:
        return None
    try:
        return settings.getint(name)
    except (TypeError, ValueError):
        raise DueConfigError(f"{name} must be a whole number or None, "
                             f"not {settings.get(name)!r}") from None


class URLSeen:
    """The URL-seen sets of one crawl on one Redis server or cluster.

    They live in the partitions of the crawl's keyspace (crawlproj.redis.keyspace);
    the configuration agreed for the crawl is kept in its meta hash.
    """

    def __init__(self, redis, keyspace: Keyspace, config: DueConfig | None = None):
        self.redis = redis
        self.keyspace = keyspace
        self._wanted = config
        self._config: DueConfig | None = None
        self._sha = None
        self._limit: tuple[int | None, bool] | None = None  # see _server_limit()
        if config is not None:
            self._setup()  # now, so that a disagreement is logged at start

    # -- agreement --------------------------------------------------------

    @property
    def config(self) -> DueConfig:
        """The crawl's configuration. Without one given, the crawl's agreed one is
        adopted when first needed (the defaults, fixed for the crawl, if none is
        agreed yet)."""
        if self._config is None:
            self._setup()
        return self._config

    def set_up(self) -> DueConfig:
        """Agree the crawl's configuration and write it where the Lua test
        reads it, if not done yet (before the first test)."""
        return self.config

    def agreed(self) -> DueConfig | None:
        """The crawl's configuration if a worker has fixed it; fixes nothing."""
        text = self.redis.hget(self.keyspace.meta, "due")
        return None if text is None else DueConfig.from_json(text)

    def _setup(self):
        self._config = self._agree(self._wanted or DueConfig())
        self.canonicalize = Canonicalizer(self._config.strip_params, self._config.strip_prefixes)
        self._configure_partitions()
        self._check_server()

    def _agree(self, wanted: DueConfig) -> DueConfig:
        """The first worker fixes the crawl's DUE configuration; others adopt it."""
        self.redis.hsetnx(self.keyspace.meta, "due", wanted.to_json())
        agreed = self.agreed()
        if agreed != wanted and self._wanted is not None:
            diff = {k: v for k, v in asdict(agreed).items() if asdict(wanted)[k] != v}
            logger.warning("DUE: this crawl was started with other DUE settings; using "
                           "the crawl's: %s", diff)
        return agreed

    def _configure_partitions(self):
        """Write the partition-local copy that lua/seen.lua reads (HSETNX: a
        partition's state is never reset by a joining worker). In exact mode
        the bucket load written is the one this server keeps compact
        (:meth:`fitted_load`); a partition whose load is larger (a crawl begun
        on a server with a larger limit) has it lowered, and its buckets are
        split down to it as the crawl goes on (lua/seen.lua, counted())."""
        c = self._config
        fields = {"mode": c.mode, "bits": c.bits}
        if c.mode == "exact":
            fields["load"] = self.fitted_load()
        else:
            fields["spec"] = bloom.spec(c.capacity, c.error_rate, self.keyspace.partitions)
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.keyspace.partitions):
            for k, v in fields.items():
                pipe.hsetnx(self.keyspace.due(p), k, v)
            if c.mode == "exact":
                pipe.hget(self.keyspace.due(p), "load")
        replies = pipe.execute()
        if c.mode != "exact":
            return
        loads = replies[len(fields)::len(fields) + 1]
        larger = [p for p, load in enumerate(loads) if int(load) > fields["load"]]
        if larger:
            logger.warning(
                "DUE: this crawl's URL-seen buckets hold up to 2 x %s fingerprints, more "
                "than this server keeps compact (%s %s%s); they are split down to %d per "
                "bucket as the crawl goes on (docs/due.md)", int(loads[larger[0]]),
                self._limit_name(), self._server_limit()[0],
                "" if self._server_limit()[1] else ", assumed: CONFIG GET refused",
                fields["load"])
            pipe = self.redis.pipeline(transaction=False)
            for p in larger:
                pipe.hset(self.keyspace.due(p), "load", fields["load"])
            pipe.execute()

    def _limit_name(self) -> str:
        """The server setting up to which a bucket stays compact: an intset of
        64-bit integers, or a listpack of 16-byte strings."""
        return "set-max-intset-entries" if self._config.bits == 64 else "set-max-listpack-entries"

    def _server_limit(self) -> tuple[int | None, bool]:
        """(the server's limit, whether it was read). CONFIG is often refused
        (a managed Redis, an ACL user without config|get): then the default of
        Redis and Valkey, 512 (intsets) or 128 (listpacks), which managed
        servers keep. None: the server has no such setting (Redis 7.0 has no
        listpack sets)."""
        if self._limit is None:
            name = self._limit_name()
            try:
                values = list(self.redis.config_get(name).values())
                self._limit = (int(values[0]) if values else None, True)
            except Exception:  # refused, or a cluster client that cannot ask
                self._limit = (DEFAULT_LIMITS[name], False)
        return self._limit

    def fitted_load(self) -> int:
        """The exact mode's bucket load on this server: DUE_BUCKET_LOAD, lowered
        to the server's limit / 2.5. A bucket of the linear hash table holds up
        to about 2 x load fingerprints (plus chance), and one past the limit
        takes the server's hash-table encoding: 41 to 83 bytes per URL instead
        of 8 to 10, measured (docs/due.md, "Measured")."""
        limit, _ = self._server_limit()
        if limit is None:
            return self._config.load
        return max(1, min(self._config.load, int(limit / HEADROOM)))

    def _check_server(self):
        """Warn when the server keeps the seen sets in their big encoding anyway."""
        c = self._config
        if c.mode != "exact" or c.bits != 128:
            return
        limit, read = self._server_limit()
        if limit is None and read:
            # Sets of strings became listpacks in Redis 7.2 (and Valkey); an
            # older server keeps each bucket of 16-byte fingerprints as a hash
            # table. The crawl works, at several times the memory.
            logger.warning(
                "DUE: this server has no set-max-listpack-entries (Redis before 7.2): buckets "
                "of 128-bit fingerprints take the hash-table encoding, several times the "
                "memory of a listpack. Use 64-bit fingerprints (intsets), or Redis 7.2+ or "
                "Valkey.")

    # -- what a URL contributes ---------------------------------------------

    def fingerprint(self, url: str) -> int:
        """The crawl's fingerprint of url; raises InvalidURL for a bad URL."""
        bits = self.config.bits  # (sets self.canonicalize up on first use)
        return fingerprint(self.canonicalize(url), bits)

    def aux(self, fp: int) -> bytes:
        """The mode's second field of a seen test (lua/seen.lua):
        exact 64-bit: nothing (the fingerprint itself is stored);
        exact 128-bit: the fingerprint as 16 raw bytes (stored as such);
        bloom: a 32-bit word that picks the URL's block, then one 16-bit word
        per bit position (its low 13 bits), from independent hashes."""
        c = self.config
        if c.mode == "exact":
            return b"" if c.bits == 64 else fp.to_bytes(16, "big", signed=True)
        data = fp.to_bytes(16, "big", signed=True)
        return b"".join([mmh3.hash_bytes(data, _BLOOM_SEED + i) for i in range(_BLOOM_WORDS)])

    def fields(self, url: str) -> tuple[int, bytes]:
        fp = self.fingerprint(url)
        return fp, self.aux(fp)

    # -- batched checks ----------------------------------------------------

    def check(self, batches: dict[int, Iterable[int]], mark: bool = True,
              max_per_call: int = CALL_SIZE) -> dict[int, list[bool]]:
        """{partition: [fingerprint, ...]} -> {partition: [is new, ...]}.

        With mark (test-and-set) the URLs are seen afterwards; a fingerprint
        twice in one batch is new the first time only. One pipelined round trip
        for everything (calls of at most max_per_call fingerprints each).
        This is the seen test apart from the frontier: URLs it marks are not
        enqueued (the frontier's own sync does both at once).
        """
        self.set_up()
        if self._sha is None:
            self._sha = self.redis.script_load(CHECK_LUA)
        calls = []
        op = "set" if mark else "test"
        alone = self.config.mode == "exact" and self.config.bits == 64  # no aux to send
        for p, fps in batches.items():
            fps = list(fps)
            for i in range(0, len(fps), max_per_call):
                args = [op]
                if alone:
                    args += fps[i:i + max_per_call]
                else:
                    for fp in fps[i:i + max_per_call]:
                        args += (fp, self.aux(fp))
                calls.append((p, args))
        pipe = self.redis.pipeline(transaction=False)
        for p, args in calls:
            # a raw EVALSHA: a cluster pipeline routes it by its key (pipe.evalsha
            # is refused there)
            pipe.execute_command("EVALSHA", self._sha, 1, self.keyspace.prefix(p), *args)
        replies = pipe.execute(raise_on_error=False)
        out: dict[int, list[bool]] = {p: [] for p in batches}
        for (p, args), reply in zip(calls, replies):
            if isinstance(reply, NoScriptError):  # the server restarted: load it again
                self._sha = self.redis.script_load(CHECK_LUA)
                reply = self.redis.execute_command("EVALSHA", self._sha, 1, self.keyspace.prefix(p),
                                                   *args)
            elif isinstance(reply, Exception):
                raise reply
            out[p].extend(c == 49 for c in reply)  # b'1'
        return out

    # -- operator views -------------------------------------------------------

    def stats(self) -> dict:
        """Entries and buckets (exact) or layers (bloom) over all partitions."""
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.keyspace.partitions):
            pipe.hgetall(self.keyspace.due(p))
        total = {"mode": self.config.mode, "bits": self.config.bits, "urls": 0}
        buckets = layers = 0
        for h in pipe.execute():
            h = {k.decode(): v.decode() for k, v in h.items() if k != b"spec"}
            total["urls"] += int(h.get("n", 0))
            if self.config.mode == "exact":
                level, s = int(h.get("L", 0)), int(h.get("s", 0))
                buckets += (1 << level) + s
            else:
                layers = max(layers, int(h.get("nl", 0)))
        if self.config.mode == "exact":
            total["buckets"] = buckets
        else:
            total["layers"] = layers
        return total
