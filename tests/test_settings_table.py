"""settings/base.py is the one table of crawlproj's settings.

Read by the code with no default of its own, complete (every name read is in
it), with nothing dead (every name in it is read), laid under every crawler and
command, and guarding against misspelt names.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.settings import default_settings as scrapy_defaults
from scrapy.utils.test import get_crawler

from crawlproj.addon import PREFIXES, InvalidSetting, MissingTable, UnknownSetting, check_settings, table
from crawlproj.redis.keyspace import Keyspace
from crawlproj.spiders.web import WebSpider

ROOT = Path(__file__).resolve().parent.parent
CODE = [ROOT / "crawlproj", ROOT / "middlewares"]  # where settings are read
GETTERS = {"get", "getbool", "getint", "getfloat", "getlist", "getdict", "getdictorlist",
           "getwithbase", "getpriority"}
NAME = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")


def ours(name: str) -> bool:
    return bool(NAME.fullmatch(name)) and name.startswith(PREFIXES)


def sources():
    for root in CODE:
        for path in sorted(root.rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text(encoding="utf-8"))


def setting(name: str) -> bool:
    """A crawlproj setting, or one of Scrapy's (whose defaults are Scrapy's)."""
    return ours(name) or hasattr(scrapy_defaults, name)


def read_of(node) -> str | None:
    """The setting a call like ``settings.getint("NAME", ...)`` reads."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in GETTERS and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
            and setting(node.args[0].value):
        return node.args[0].value
    return None


def names_in_code() -> dict[str, list[str]]:
    """Every crawlproj setting name the code mentions as a string (docstrings and
    ``__all__`` aside), with where."""
    found: dict[str, list[str]] = {}
    for path, tree in sources():
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and node.body and isinstance(node.body[0], ast.Expr):
                skip.add(id(node.body[0].value))  # docstring
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                skip.update(id(e) for e in ast.walk(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip and ours(node.value):
                found.setdefault(node.value, []).append(f"{path}:{node.lineno}")
    return found


def test_table_names_have_crawlproj_prefixes():
    """The typo check recognises a crawlproj name by its prefix: every name
    in the table must have one, or its misspellings would pass unnoticed."""
    names = table()
    assert len(names) > 40
    assert [n for n in names if not n.startswith(PREFIXES)] == []


def fallback(node) -> bool:
    """A literal (None aside: it only turns "" into unset) or a CONSTANT."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    return isinstance(node, (ast.Name, ast.Attribute)) and bool(NAME.fullmatch(
        node.id if isinstance(node, ast.Name) else node.attr))


def test_no_setting_is_read_with_an_inline_default():
    """``s.getfloat("FRONTIER_DELAY_FACTOR", 10.0)`` or ``s.get("CRAWL_SCOPE") or
    "any"`` writes a default a second time, where it drifts from the table."""
    inline = []
    for path, tree in sources():
        for node in ast.walk(tree):
            name = read_of(node)
            if name and (len(node.args) > 1 or any(k.arg == "default" for k in node.keywords)):
                inline.append(f"{path}:{node.lineno} {name}")
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                for i, value in enumerate(node.values):
                    if read_of(value) and any(fallback(v) for v in node.values[i + 1:]):
                        inline.append(f"{path}:{node.lineno} {read_of(value)} or ...")
    assert inline == []


def test_every_setting_the_code_names_is_in_the_table():
    known = table()
    assert {n: w for n, w in names_in_code().items() if n not in known} == {}


def test_every_setting_in_the_table_is_read():
    read = names_in_code()
    assert [n for n in table() if n not in read] == []


@pytest.mark.parametrize("profile", ["settings.base", "settings.broad", "settings.cluster"])
def test_profiles_set_only_known_names(profile):
    module = importlib.import_module(profile)
    check_settings(Settings({n: getattr(module, n) for n in dir(module) if n.isupper()}))


# -- the table under every crawler and command ---------------------------------------

def test_a_crawler_of_the_web_spider_gets_the_table_whatever_its_settings():
    """get_crawler(WebSpider, {...}) starts from Scrapy's defaults alone, like a
    settings module of one's own or a Scrapyd job: the spider brings the table."""
    crawler = get_crawler(WebSpider, {"FRONTIER_DELAY_FACTOR": 2.5})
    s = crawler.settings
    for name, value in table().items():
        if name != "FRONTIER_DELAY_FACTOR":
            assert s[name] == value, name
            assert s.getpriority(name) == 0, name  # below everything else
    assert s.getfloat("FRONTIER_DELAY_FACTOR") == 2.5


def test_the_web_spider_is_built_on_the_table_before_any_addon_runs():
    """Scrapy builds a crawl's spider first and runs add-ons after it
    (Crawler.crawl_async): the spider reads CRAWL_SCOPE and PAGE_TEXT_MAX_CHARS
    from a crawler no add-on has touched."""
    spider = WebSpider.from_crawler(Crawler(WebSpider, Settings({"PAGE_TEXT_MAX_CHARS": 7})))
    assert spider.scope.mode == table()["CRAWL_SCOPE"]
    assert spider.text_max_chars == 7


def test_settings_without_the_table_are_refused_where_the_crawl_begins():
    """A crawler of another spider, with neither settings.base nor the add-on,
    must not run on zeros read for missing settings."""
    bare = get_crawler(settings_dict={"CRAWL_ID": "bare"})
    with pytest.raises(MissingTable, match="ADDONS"):
        Keyspace.from_settings(bare.settings, None)


def test_the_addon_in_addons_gives_any_spider_the_table():
    crawler = get_crawler(settings_dict={"ADDONS": {"crawlproj.addon.Addon": 0}})
    assert crawler.settings.getfloat("FRONTIER_LEASE_TTL") == table()["FRONTIER_LEASE_TTL"]


def test_the_addon_refuses_a_misspelt_name():
    with pytest.raises(UnknownSetting, match=r"FRONTIER_DELAY_FACTR \(did you mean "
                                             r"FRONTIER_DELAY_FACTOR\?\)"):
        get_crawler(WebSpider, {"FRONTIER_DELAY_FACTR": 2})


def test_a_misspelling_far_from_every_name_is_named_alone():
    with pytest.raises(UnknownSetting, match=r"^unknown setting GC_QQQQQQQQQQQQ; "):
        check_settings(Settings({"GC_QQQQQQQQQQQQ": 1}))


def test_names_of_scrapy_and_of_others_pass():
    check_settings(Settings({"DOWNLOAD_DELAY": 1, "REQUEST_FINGERPRINTER_CLASS": "x.Y",
                          "MY_OWN_SETTING": 3}))


@pytest.mark.parametrize("name,value,said", [
    ("FRONTIER_DELAY_FACTOR", "abc", "FRONTIER_DELAY_FACTOR='abc' is not a number"),
    ("ROBOTS_RETRY_TIMES", "x", "ROBOTS_RETRY_TIMES='x' is not a whole number"),
    ("ROBOTS_RETRY_TIMES", "2.5", "ROBOTS_RETRY_TIMES='2.5' is not a whole number"),
    ("ROBOTS_MAXSIZE", "-5", "ROBOTS_MAXSIZE='-5' must be 0 or more"),
    ("ROBOTS_EXPIRY", "nan", "ROBOTS_EXPIRY='nan' must be 0 or more"),
    ("ROBOTS_RETRY_WAIT", -1.0, "ROBOTS_RETRY_WAIT=-1.0 must be 0 or more"),
    ("INDEX_ENABLED", "maybe", "INDEX_ENABLED='maybe' is not a boolean"),
])
def test_a_value_not_of_its_settings_kind_is_refused_in_one_line(name, value, said):
    with pytest.raises(InvalidSetting) as exc:
        check_settings(Settings({**table(), name: value}))
    assert str(exc.value).startswith(said) and "\n" not in str(exc.value)


def test_every_default_in_the_table_is_of_its_own_kind():
    check_settings(Settings(table()))
    check_settings(Settings({**table(), "ROBOTS_EXPIRY": "3600.5", "FRONTIER_IDLE_WAIT": "0",
                             "INDEX_ENABLED": "false", "ROBOTS_MAXSIZE": "1000"}))


OWN_MODULE = """
# a settings module of one's own: crawlproj's commands and spider, no settings.base
BOT_NAME = "mine"
SPIDER_MODULES = ["crawlproj.spiders"]
COMMANDS_MODULE = "crawlproj.commands"
"""


def run_scrapy(args, tmp_path, env_extra=None, module=None):
    """`scrapy ARGS` in the project directory, under a settings module of
    one's own when given; REDIS_URL only when env_extra names it."""
    env = dict(os.environ, CRAWL_DATA_DIR=str(tmp_path / "data"))
    env.pop("REDIS_URL", None)
    env.update(env_extra or {})
    if module is not None:
        (tmp_path / "own_settings.py").write_text(textwrap.dedent(module))
        env["SCRAPY_SETTINGS_MODULE"] = "own_settings"
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


LOG_LINE = ("2026-01-05T10:00:00.123Z   200      10422 http://{host}/ - - text/html w "
            "20260105100000101+21 sha1:ABC - -\n")


def test_a_command_under_a_settings_module_of_ones_own_gets_the_table(tmp_path):
    """`scrapy report` builds no crawler: its default_settings carry the table.
    It reads CRAWL_DATA_DIR, CRAWLLOG_DIR (unset: CRAWL_DATA_DIR/logs) and
    CRAWL_ID, and reports the logs of that crawl only."""
    logs = tmp_path / "data" / "logs"
    logs.mkdir(parents=True)
    (logs / "crawl-mine@w1.log").write_text(LOG_LINE.format(host="mine.example"))
    (logs / "crawl-other@w2.log").write_text(LOG_LINE.format(host="other.example"))
    run = run_scrapy(["report", "--json"], tmp_path, {"CRAWL_ID": "mine"}, module=OWN_MODULE)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["pages_per_host"] == {"mine.example": 1}


# -- a misspelt name stops `scrapy crawl web` at start --------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("where", ["-s", "settings module"])
def test_crawl_stops_at_start_on_a_misspelt_setting(where, redis_url, tmp_path):
    """The settings module, -s and Scrapyd's job settings (which Scrapyd passes
    as -s) all reach the check. Were the name let through, this worker would
    join crawl "typo" on a real server and exit 0 once its frontier is empty."""
    import redis
    args = ["crawl", "web"]
    module = None
    if where == "-s":
        args += ["-s", "FRONTIER_DELAY_FACTR=2"]
    else:
        module = "from settings.base import *\nFRONTIER_DELAY_FACTR = 2\n"
    run = run_scrapy(args, tmp_path, {"REDIS_URL": redis_url, "CRAWL_ID": "typo"}, module=module)
    assert run.returncode == 2, run.stderr
    said = [line for line in run.stderr.splitlines() if "FRONTIER_DELAY_FACTR" in line]
    assert said == ["crawlproj: unknown setting FRONTIER_DELAY_FACTR (did you mean "
                    "FRONTIER_DELAY_FACTOR?); crawlproj's settings are listed in "
                    "settings/base.py"], run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert redis.Redis.from_url(redis_url).dbsize() == 0  # nothing started


@pytest.mark.e2e
def test_crawl_stops_at_start_on_a_value_of_the_wrong_kind(redis_url, tmp_path):
    import redis
    run = run_scrapy(["crawl", "web", "-s", "ROBOTS_EXPIRY=abc", "-s", "ROBOTS_MAXSIZE=-5"], tmp_path,
                     {"REDIS_URL": redis_url, "CRAWL_ID": "badvalue"})
    assert run.returncode == 2, run.stderr
    assert [line for line in run.stderr.splitlines() if "ROBOTS_" in line] == [
        "crawlproj: ROBOTS_EXPIRY='abc' is not a number; ROBOTS_MAXSIZE='-5' must be 0 or more "
        "(settings/base.py says what each means)"], run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert redis.Redis.from_url(redis_url).dbsize() == 0
