"""Bloom-filter sizing for the DUE's bloom mode (lua/seen.lua).

A Bloom filter (Bloom 1970) of m bits and k hash positions per URL holds n URLs
at a false-positive rate of about (1 - e^(-kn/m))^k; at best m/n = -ln p / ln^2 2
bits per URL: 33.5 bits (4.19 bytes) with k = 23 at p = 1e-7, against
Mercator's 5.4 bytes per URL for an exact table (§3.2). A false positive is a
URL that is never fetched.

Blocked layout (Putze, Sanders & Singler 2007): a URL's k bits all lie in one
block of BLOCK_BITS bits, so the Lua test reads one block (one GETRANGE) instead
of making k calls. The block and each position come from independent hashes
(crawlproj.due.urlseen.URLSeen.aux), as the analysis below assumes. Blocks
fill unevenly (a Poisson number of URLs each), which
costs a little more memory for the same rate; with 8192-bit blocks 34.5 bits
(4.31 bytes) per URL give 1e-7. :func:`blocked_rate` is that rate, and the
sizing below finds the fewest bits per URL that meet the configured rate.

Layers (Almeida, Baquero, Preguiça & Hutchison 2007, "Scalable Bloom
Filters"): layer j + 1 is started when layer j is full. A layer's bits are
allocated when it starts, so the layer table decides the memory of a crawl
of any size:

* sized (DUE_BLOOM_CAPACITY set): layer j holds capacity x 2^j URLs at rate
  p / 2^j. Up to the capacity one layer at rate p, 4.3 bytes per URL at
  1e-7 when the crawl reaches it; a crawl that outgrows it still has a rate
  below 2p (p + p/2 + ...), at a few more bits per URL in the later layers.
* growing (DUE_BLOOM_CAPACITY None, the default): layer j holds
  FIRST_LAYER x 2^j URLs at rate p (1 - r) r^j with r = TIGHTENING, so the
  rate stays below p (the sum of the layers' rates) at every size. At 1e-7
  the bits take 4.8 to 11.4 bytes per URL at every size from 1M to 2 billion
  URLs (about 7.6 at 1M, 8.1 at 10M, 5.8 at 1B: :func:`bytes_per_url`; the
  allocator's rounding adds to it: 8.75 and 9.67 measured on Redis 8.2),
  where a first layer sized for 10M URLs takes 43 bytes per URL at 1M. The
  price is a probe per layer for a new URL: 5 layers at 10M URLs, 11 at 1B.
  Almeida et al. advise r = 0.8 to 0.9 for growth by 2; halving the rate
  (r = 0.5) adds 1.6 bits per URL per layer in blocked filters, which costs
  more than its smaller first layer saves past a few million URLs (8.4
  against 8.1 bytes per URL at 10M, 6.9 against 5.8 at 1B).

A layer is cut into bitmaps (Redis strings) of at most MAX_BITMAP_BITS bits;
a URL touches one block of one bitmap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

BLOCK_BITS = 8192                    # 1 KiB: one GETRANGE per test
MAX_BITMAP_BITS = 1 << 27            # 16 MiB per Redis string
BLOCKS_PER_BITMAP = MAX_BITMAP_BITS // BLOCK_BITS
MAX_LAYERS = 24                      # capacity x 2^24 in all: far more than any crawl
MAX_K = 40                           # bit positions per URL the aux field carries
FIRST_LAYER = 1 << 19                # growing filter: URLs of the crawl's first layer
TIGHTENING = 0.8                     # growing filter: each layer's rate over the last's
LN2 = math.log(2)


@dataclass(frozen=True)
class Layer:
    k: int          # bits per URL
    blocks: int     # blocks of BLOCK_BITS bits in the layer
    cap: int        # URLs before the next layer is started
    bits_per_url: float
    rate: float     # its false-positive rate when it holds cap URLs

    @property
    def bitmaps(self) -> int:
        return -(-self.blocks // BLOCKS_PER_BITMAP)

    @property
    def bytes(self) -> int:
        return self.blocks * BLOCK_BITS // 8


def standard_rate(c: float, k: int) -> float:
    """Rate of an unblocked filter with c bits per URL."""
    return (1 - math.exp(-k / c)) ** k


def blocked_rate(c: float, k: int, block: int = BLOCK_BITS) -> float:
    """Rate of a blocked filter with c bits per URL: the number of URLs in a
    block is Poisson with mean block/c; a URL in a block of j others is a false
    positive when its k bits are among the bits those j set."""
    lam = block / c
    total, j = 0.0, 0
    while True:
        pj = math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1)) if j else math.exp(-lam)
        total += pj * (1 - (1 - 1 / block) ** (k * j)) ** k
        if j > lam and pj < 1e-18:
            return total
        j += 1


@lru_cache(maxsize=256)
def sizing(error_rate: float) -> tuple[float, int]:
    """(bits per URL, k): the fewest bits (in steps of 1/8) meeting error_rate."""
    c = max(1.0, math.floor(-math.log(error_rate) / LN2 ** 2 * 8) / 8)
    while True:
        k0 = max(1, round(c * LN2))
        rate, k = min((blocked_rate(c, k), k) for k in range(max(1, k0 - 4), k0 + 5))
        if rate <= error_rate:
            return c, k
        c += 0.125


def layer(capacity: int, error_rate: float, j: int = 0) -> Layer:
    """Layer j of a sized filter: capacity x 2^j URLs at error_rate / 2^j."""
    return _layer(capacity << j, error_rate / (1 << j))


def growing_layer(first: int, error_rate: float, j: int = 0) -> Layer:
    """Layer j of a growing filter: first x 2^j URLs at error_rate (1 - r) r^j."""
    return _layer(first << j, error_rate * (1 - TIGHTENING) * TIGHTENING ** j)


def _layer(cap: int, rate: float) -> Layer:
    c, k = sizing(rate)
    blocks = max(1, math.ceil(cap * c / BLOCK_BITS))
    return Layer(k, blocks, cap, c, rate)


def check(capacity: int | None, error_rate: float) -> None:
    """ValueError unless capacity and error_rate can size a filter (without
    sizing it: that takes half a second, which a worker in exact mode
    should not pay at every start)."""
    if not (capacity is None or (isinstance(capacity, int) and not isinstance(capacity, bool)
                                 and capacity >= 1)):
        raise ValueError(f"DUE_BLOOM_CAPACITY must be a positive integer or None, "
                         f"not {capacity!r}")
    if not (isinstance(error_rate, float) and 1e-12 <= error_rate < 1):
        raise ValueError(f"DUE_BLOOM_ERROR_RATE must be in [1e-12, 1), not {error_rate!r}")


def layers(capacity: int | None, error_rate: float, partitions: int = 1) -> list[Layer]:
    """The layers one partition's filter may use (up to MAX_LAYERS, while k <=
    MAX_K), of a crawl whose filter is sized for `capacity` URLs (None:
    growing), spread over `partitions` partitions."""
    check(capacity, error_rate)
    if capacity is None:
        first = -(-FIRST_LAYER // partitions)
        make = partial(growing_layer, first, error_rate)
    else:
        make = partial(layer, -(-capacity // partitions), error_rate)
    out = []
    for j in range(MAX_LAYERS):
        x = make(j)
        if x.k > MAX_K:
            break
        out.append(x)
    return out


def spec(capacity: int | None, error_rate: float, partitions: int = 1) -> str:
    """The layer table as lua/seen.lua reads it: 'k,blocks,cap;...'."""
    return spec_of(layers(capacity, error_rate, partitions))


def spec_of(table: list[Layer]) -> str:
    return ";".join(f"{x.k},{x.blocks},{x.cap}" for x in table)


def bytes_per_url(table: list[Layer], n: int) -> float:
    """The bitmaps' bytes per URL once n URLs are in (every layer started so
    far allocated whole), before the allocator's rounding."""
    allocated = held = 0
    for x in table:
        allocated += x.bytes
        held += x.cap
        if held >= n:
            break
    return allocated / n


def measured_rate(fills_per_block: list[float], k: int) -> float:
    """A layer's rate from the fraction of set bits of each of its blocks: a
    new URL lands in a uniformly chosen block and is a false positive when its
    k bits are all set there (bits chosen independently)."""
    return sum(f ** k for f in fills_per_block) / len(fills_per_block)
