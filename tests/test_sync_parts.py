"""The sync script is composed of parts, one per concern (crawlproj/frontier/
frontier.py, SYNC_PARTS): the composed text is the parts in their order, it
loads as one script, and each part is needed. Each part's own claims are tested
in test_frontier.py (the frontier part), test_due.py (the DUE's),
test_sync_budgets.py, test_sync_recrawl.py and test_sync_control.py."""

from __future__ import annotations

import pytest
import redis

from crawlproj.frontier.frontier import SYNC_LUA, SYNC_PARTS, Batch, Frontier
from crawlproj.redis.client import lua_script
from crawlproj.redis.keyspace import Keyspace


def test_the_sync_script_is_its_parts_in_order(redis_url):
    assert SYNC_PARTS == (
        ("crawlproj.due", "seen.lua"),
        ("crawlproj.monitor", "sync_control.lua"),
        ("crawlproj.traps", "sync_budgets.lua"),
        ("crawlproj.recrawl", "sync_recrawl.lua"),
        ("crawlproj.frontier", "frontier.lua"),
        ("crawlproj.frontier", "sync.lua"),
    )
    assert SYNC_LUA == "".join(lua_script(package, name) for package, name in SYNC_PARTS)
    # one script: one SHA, one EVALSHA per partition per sync
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "parts", 2))
    f.due.set_up()
    r.config_resetstat()
    f.sync({p: Batch(lease=1) for p in range(2)})
    stats = r.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 2 and stats["cmdstat_script|load"]["calls"] == 1
    assert f._sha == r.script_load(SYNC_LUA)


def test_each_part_says_what_it_holds_defines_and_uses():
    for package, name in SYNC_PARTS[1:]:  # the DUE's seen.lua has its own header
        text = lua_script(package, name)
        head = text[:text.index("\nlocal ")]
        assert head.startswith("-- The sync script's ") and "Uses" in head, name
        assert "Defines:" in head or name == "sync.lua", name


@pytest.mark.parametrize("left_out", range(len(SYNC_PARTS)), ids=[n for _, n in SYNC_PARTS])
def test_a_script_without_one_part_fails(redis_url, left_out):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "part", 1))
    f.due.set_up()
    f._sha = r.script_load("".join(lua_script(package, name) for k, (package, name)
                                   in enumerate(SYNC_PARTS) if k != left_out))
    with pytest.raises((redis.ResponseError, TypeError)):
        # without the main part the script answers nothing (None), which
        # cannot be read as an answer
        f.sync({0: Batch(enqueue=[f.entry("a.ex", "http://a.ex/", 0.0, b"x")], lease=1)})
