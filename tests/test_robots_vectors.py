"""robots.txt: Protego (what Scrapy's RobotsTxtMiddleware uses, and what the
workers share) against Google's reference test vectors and real files.

Google's robots_test.cc (RFC 9309 plus Google-specific behaviour) gives 145
IsUserAgentAllowed() assertions. Protego 0.7 agrees on 131 of them; the 14 it
does not are listed in KNOWN_DEVIATIONS with the reason, and the test checks
that Protego still answers the *opposite* of Google there, so a Protego upgrade
that changes behaviour in either direction fails here and gets looked at.

    .venv/bin/python -m pytest tests/test_robots_vectors.py -q
"""

from __future__ import annotations

import importlib
import json
import re
import tarfile

import pytest
from protego import Protego
from scrapy.robotstxt import decode_robotstxt

from tests.data import SHARED_DATA, require

DATA = SHARED_DATA / "robots"
VECTORS = DATA / "robots_test_vectors.json"
# The longest wait the frontier keeps to (FRONTIER_MAX_DELAY), a Crawl-delay included.
CAP = importlib.import_module("settings.base").FRONTIER_MAX_DELAY
REAL_WORLD = DATA / "real_world" / "protego_robots_txt_4231_hosts.tar.gz"

# robots_test.cc line -> why Protego differs from Google's reference parser.
KNOWN_DEVIATIONS = {
    # A line that is not a rule does not end a group for Google: "User-agent:
    # FooBot", junk, "User-agent: *", "Disallow: /" is one group for both
    # agents. Protego ends FooBot's group at the junk line (FooBot: no rules).
    147: "unknown line between user-agent lines splits the group",
    # Google matches the robots.txt user-agent value only up to its first
    # space or non-token character ("FOO BAR" names agent "foo"); Protego
    # compares the whole value, so "Foo" does not match "FOO BAR".
    219: "user-agent value 'FOO BAR' not cut at the first space",
    220: "user-agent value 'foo bar' not cut at the first space",
    221: "user-agent value 'FoO bAr' not cut at the first space",
    225: "user-agent value 'FOO BAR' not cut at the first space",
    226: "user-agent value 'foo bar' not cut at the first space",
    227: "user-agent value 'FoO bAr' not cut at the first space",
    246: "GoogleOnly: caller 'Foo' should match group 'Foo Bar' (cut to 'Foo')",
    # The same rule seen from the other side: for Google the group is 'Foo',
    # so a caller 'Foo Bar' falls back to '*'; Protego applies 'Foo Bar'.
    247: "GoogleOnly: caller 'Foo Bar' should not match group 'Foo Bar'",
    # Google expects the caller to pass a %-encoded URL and compares bytes; a
    # raw 'ツ' in the URL does not match. Protego %-encodes the URL itself, so
    # the raw and encoded forms match alike (Scrapy passes encoded URLs, so
    # this does not change what a crawl fetches).
    419: "raw non-ASCII URL path is %-encoded by Protego before matching",
    430: "raw non-ASCII URL path is %-encoded by Protego before matching",
    # %62%61%7A in a rule is not 'baz' for Google (no decoding of unreserved
    # characters); Protego normalises the escapes and matches.
    441: "Protego decodes %-escaped unreserved characters in rules",
    # Google ignores the part of a line beyond 16,664 bytes (GoogleOnly); a
    # rule cut there matches differently. Protego reads lines in full.
    539: "GoogleOnly: over-long rule line is not truncated at 16,664 bytes",
    565: "GoogleOnly: over-long rule line is not truncated at 16,664 bytes",
}


def _cases():
    return json.loads(require(VECTORS).read_text(encoding="utf-8"))["cases"]


def _case_id(case) -> str:
    return f"{case['line']}-{case['test'].split('.')[-1]}"


CASES = _cases()


def test_vector_file_shape():
    assert len(CASES) == 145
    assert len({c["line"] for c in CASES}) == len(CASES)  # line is a unique key
    assert set(KNOWN_DEVIATIONS) <= {c["line"] for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_google_vector(case):
    allowed = Protego.parse(case["robotstxt"]).can_fetch(case["url"], case["user_agent"])
    reason = KNOWN_DEVIATIONS.get(case["line"])
    if reason is None:
        assert allowed == case["expect_allowed"]
    else:
        # Still deviating; if this fails, Protego now agrees with Google here:
        # remove the entry from KNOWN_DEVIATIONS.
        assert allowed != case["expect_allowed"], f"deviation gone: {reason}"


def test_agreement_count():
    right = sum(
        Protego.parse(c["robotstxt"]).can_fetch(c["url"], c["user_agent"]) == c["expect_allowed"]
        for c in CASES
    )
    assert right == len(CASES) - len(KNOWN_DEVIATIONS) == 131


_CRAWL_DELAY_LINE = re.compile(r"(?im)^[ \t]*crawl-delay[ \t]*:")


@pytest.mark.slow
def test_real_world_robots_files_parse():
    """Every one of the 4,231 real robots.txt files parses and answers, decoded
    the way Scrapy's ProtegoRobotParser decodes them. Also the Crawl-delay
    figures the frontier will see (FRONTIER_OBEY_CRAWL_DELAY)."""
    require(REAL_WORLD)
    files = with_delay_line = delay_for_us = over_cap = 0
    delays: list[float] = []
    with tarfile.open(REAL_WORLD) as tar:  # read in place, nothing extracted
        for member in tar:
            if not member.isfile():
                continue
            body = tar.extractfile(member).read()
            text = decode_robotstxt(body, None)
            rp = Protego.parse(text)
            assert isinstance(rp.can_fetch("https://example.com/some/page?q=1", "crawlproj"), bool)
            assert isinstance(rp.can_fetch("https://example.com/", "*"), bool)
            files += 1
            if _CRAWL_DELAY_LINE.search(text):
                with_delay_line += 1
            delay = rp.crawl_delay("crawlproj")
            if delay is not None:
                delay_for_us += 1
                delays.append(float(delay))
                assert delay >= 0
                if delay > CAP:
                    over_cap += 1
    assert files == 4231
    # Measured with Protego 0.7.0: 760 files have a Crawl-delay line, 533 of
    # them in a group that applies to us (the "*" group; none names
    # crawlproj), median 10 s, 7 from 100 to 180 s, 3 above the 300 s cap
    # (600, 600, 86,400 s).
    assert with_delay_line == 760
    assert delay_for_us == 533
    delays.sort()
    assert delays[len(delays) // 2] == 10.0
    assert over_cap == 3
    assert max(delays) == 86400.0
