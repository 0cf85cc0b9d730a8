"""The URL filters: include and exclude patterns, and a file of rules in
Nutch's regex-urlfilter.txt form, decided where URLs enter the frontier
(crawlproj/frontier/urlfilter.py, admission.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from scrapy import Request
from scrapy.settings import Settings

from crawlproj.addon import apply_table
from crawlproj.frontier.admission import Filtered, Refused, admit
from crawlproj.frontier.frontier import Frontier
from crawlproj.frontier.urlfilter import URLFilter, URLFilterError
from crawlproj.prioritizers.basic import BreadthFirst
from crawlproj.redis.keyspace import Keyspace

ROOT = Path(__file__).resolve().parent.parent


def url_filter(**settings) -> URLFilter | None:
    s = Settings()
    apply_table(s)
    for name, value in settings.items():
        s.set(name, value, priority="cmdline")
    return URLFilter.from_settings(s)


def verdicts(f: URLFilter, urls) -> dict[str, str | None]:
    return {u: (None if (r := f.refusal(u)) is None else r[0]) for u in urls}


# -- the settings ---------------------------------------------------------------------

def test_no_pattern_no_filter():
    assert url_filter() is None
    assert url_filter(URLFILTER_INCLUDE=[], URLFILTER_EXCLUDE="", URLFILTER_FILE="") is None


def test_excludes_refuse_includes_admit_and_an_exclude_wins():
    f = url_filter(URLFILTER_INCLUDE=[r"^https?://docs\.python\.test/library/", r"/tutorial/"],
                   URLFILTER_EXCLUDE=[r"\.pdf$", r"json"])
    assert verdicts(f, [
        "http://docs.python.test/library/os.html",
        "http://docs.python.test/tutorial/index.html",        # the second include
        "http://docs.python.test/library/json.html",           # included, and excluded
        "http://docs.python.test/library/x.pdf",
        "http://docs.python.test/reference/index.html",        # no include matches
        "http://other.test/library/os.html",
    ]) == {
        "http://docs.python.test/library/os.html": None,
        "http://docs.python.test/tutorial/index.html": None,
        "http://docs.python.test/library/json.html": "exclude/1",
        "http://docs.python.test/library/x.pdf": "exclude/0",
        "http://docs.python.test/reference/index.html": "include",
        "http://other.test/library/os.html": "include",
    }


def test_patterns_search_anywhere_in_the_url_and_are_case_sensitive():
    f = url_filter(URLFILTER_EXCLUDE=["PDF", "(?i)/print/"])
    assert f.refusal("http://a.test/doc.pdf") is None            # PDF is not pdf
    assert f.refusal("http://a.test/x.PDF?y=1")[0] == "exclude/0"  # searched, not matched whole
    assert f.refusal("http://a.test/Print/1")[0] == "exclude/1"


def test_patterns_from_the_command_line_are_one_pattern_or_a_json_list():
    # a comma belongs to a pattern ({1,3}); a list is given as JSON
    f = url_filter(URLFILTER_EXCLUDE=r"/p\d{1,3}$")
    assert f.refusal("http://a.test/p12")[0] == "exclude/0"
    assert f.refusal("http://a.test/p1234") is None
    f = url_filter(URLFILTER_EXCLUDE=r'["/a$", "/b$"]')
    assert verdicts(f, ["http://a.test/a", "http://a.test/b", "http://a.test/c"]) == {
        "http://a.test/a": "exclude/0", "http://a.test/b": "exclude/1", "http://a.test/c": None}


@pytest.mark.parametrize("settings, message", [
    ({"URLFILTER_EXCLUDE": ["ok", "([a-z"]},
     "URLFILTER_EXCLUDE[1]: '([a-z' is not a regular expression: unterminated character set "
     "at position 1"),
    ({"URLFILTER_INCLUDE": "(?P<x"},
     "URLFILTER_INCLUDE[0]: '(?P<x' is not a regular expression: missing >, unterminated "
     "name at position 4"),
    ({"URLFILTER_EXCLUDE": '["a", '},
     "URLFILTER_EXCLUDE: '[\"a\", ' is neither a JSON list of patterns nor one pattern: "
     "Expecting value at position 6 (a list is given as JSON: '[\"a\", \"b\"]')"),
    ({"URLFILTER_INCLUDE": [3]}, "URLFILTER_INCLUDE[0]: 3 is not a string"),
])
def test_a_pattern_that_does_not_compile_is_named_in_one_line(settings, message):
    with pytest.raises(URLFilterError) as info:
        url_filter(**settings)
    assert str(info.value) == message


@pytest.mark.parametrize("pattern", [
    r".*(/[^/]+)/[^/]+\1/[^/]+\1/", r"^.*/a/", r".*?\.pdf$", r".*+", r"^.*$", r".*|x",
    r"(?i).*PDF$"])
def test_a_leading_dot_star_searches_alike(pattern):
    """The filter drops a leading ".*" from what it searches with (speed):
    every URL gets the verdict the pattern as written gives."""
    f = url_filter(URLFILTER_EXCLUDE=[pattern])
    urls = ["http://a.test/", "http://a.test/a/b/a/c/a/", "http://a.test/x/y/x/y/x/",
            "http://a.test/a/", "http://a.test/doc.pdf", "http://a.test/doc.PDF?x", "http://x.test/"]
    assert [f.refusal(u) is not None for u in urls] == \
        [re.search(pattern, u) is not None for u in urls]


# -- the file -----------------------------------------------------------------------------

NUTCH = """\
# skip file: ftp: and mailto: urls
-^(?:file|ftp|mailto):

# skip image and other suffixes we can't yet parse
-(?i)\\.(?:gif|jpg|png|ico|css|js|zip|gz|exe)$

   # an indented comment
-[?*!@=]
+^https?://docs\\.python\\.test/library/
-.*json.*
+^https?://docs\\.python\\.test/
"""


def test_the_file_first_match_wins_and_no_match_is_refused(tmp_path):
    path = tmp_path / "regex-urlfilter.txt"
    path.write_text(NUTCH)
    f = url_filter(URLFILTER_FILE=str(path))
    assert verdicts(f, [
        "http://docs.python.test/library/os.html",      # line 9: +
        "http://docs.python.test/library/json.html",    # line 9 first: + (line 10 never asked)
        "http://docs.python.test/tutorial/json.html",   # line 10: -
        "http://docs.python.test/tutorial/a.html",      # line 11: +
        "http://docs.python.test/_static/a.PNG",        # line 5: -
        "http://docs.python.test/search.html?q=x",      # line 8: -
        "http://other.test/",                           # no rule: refused
    ]) == {
        "http://docs.python.test/library/os.html": None,
        "http://docs.python.test/library/json.html": None,
        "http://docs.python.test/tutorial/json.html": "file/10",
        "http://docs.python.test/tutorial/a.html": None,
        "http://docs.python.test/_static/a.PNG": "file/5",
        "http://docs.python.test/search.html?q=x": "file/8",
        "http://other.test/": "file/unmatched",
    }


def test_the_file_and_the_patterns_must_all_admit_a_url(tmp_path):
    path = tmp_path / "rules.txt"
    path.write_text("+/library/\n")
    f = url_filter(URLFILTER_FILE=str(path), URLFILTER_EXCLUDE=["json"],
                   URLFILTER_INCLUDE=["python"])
    assert verdicts(f, ["http://docs.python.test/library/os.html",
                        "http://docs.python.test/library/json.html",
                        "http://docs.other.test/library/os.html",
                        "http://docs.python.test/tutorial/"]) == {
        "http://docs.python.test/library/os.html": None,
        "http://docs.python.test/library/json.html": "exclude/0",
        "http://docs.other.test/library/os.html": "include",
        "http://docs.python.test/tutorial/": "file/unmatched",
    }


def test_a_file_of_excludes_alone_refuses_everything_else_as_nutch_does(tmp_path):
    path = tmp_path / "rules.txt"
    path.write_text("-\\.pdf$\n")
    f = url_filter(URLFILTER_FILE=str(path))
    assert f.refusal("http://a.test/x.pdf")[0] == "file/1"
    assert f.refusal("http://a.test/x.html")[0] == "file/unmatched"


@pytest.mark.parametrize("text, message", [
    ("+ok\n-([a-z\n", "URLFILTER_FILE {path}:2: '([a-z' is not a regular expression: "
                      "unterminated character set at position 1"),
    ("+ok\nhttp://a.test/\n", "URLFILTER_FILE {path}:2: a rule starts with + (include) or - "
                              "(exclude), a comment with #: 'http://a.test/'"),
    ("+ok\n\xff\n", "URLFILTER_FILE {path}: not UTF-8 text (line 2)"),
    ("# nothing but comments\n\n", "URLFILTER_FILE {path} has no rule"),
])
def test_a_bad_file_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / "rules.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(URLFilterError) as info:
        url_filter(URLFILTER_FILE=str(path))
    assert str(info.value) == message.format(path=path)


def test_a_file_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(URLFilterError) as info:
        url_filter(URLFILTER_FILE=str(tmp_path / "nope.txt"))
    assert str(info.value) == f"URLFILTER_FILE {tmp_path / 'nope.txt'}: no such file"


# -- at the frontier's admission --------------------------------------------------------

def test_admission_refuses_filtered_urls_before_the_due(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "uf", 1))
    uf = url_filter(URLFILTER_EXCLUDE=["/private/"])
    with pytest.raises(Filtered) as info:
        admit(f, BreadthFirst(), Request("http://a.test/private/1"), None, 2083, None, uf)
    assert (info.value.stat, info.value.reason) == ("urlfilter/refused", "exclude/0")
    assert isinstance(info.value, Refused)
    # the frontier's own refusals come first and keep their stat
    with pytest.raises(Refused) as info:
        admit(f, BreadthFirst(), Request("ftp://a.test/private/1"), None, 2083, None, uf)
    assert info.value.stat == "frontier/refused"
    p, entry = admit(f, BreadthFirst(), Request("http://a.test/public/1"), None, 2083, None, uf)
    assert entry is not None


# -- at start ----------------------------------------------------------------------------

def scrapy(*args, tmp_path):
    import os
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRAWL_DATA_DIR", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env["CRAWL_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("setting, line", [
    ("URLFILTER_EXCLUDE=([a-z", "crawlproj: URLFILTER_EXCLUDE[0]: '([a-z' is not a regular "
                                "expression: unterminated character set at position 1"),
    ("URLFILTER_FILE=no-such-rules.txt", "crawlproj: URLFILTER_FILE no-such-rules.txt: no such "
                                         "file"),
])
def test_scrapy_crawl_refuses_a_bad_filter_in_one_line_before_it_starts(tmp_path, setting, line):
    run = scrapy("crawl", "web", "-a", "seeds=http://a.test/", "-s", setting, tmp_path=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == line
    assert not (tmp_path / "data" / "redis").exists()  # nothing was started


def test_scrapy_seed_admits_what_the_filters_admit(redis_url, tmp_path):
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env.update(REDIS_URL=redis_url, CRAWL_DATA_DIR=str(tmp_path / "data"), CRAWL_ID="uf-seed")
    run = subprocess.run([sys.executable, "-m", "scrapy", "seed",
                          "http://a.test/private/x,http://a.test/ok", "-s",
                          "URLFILTER_EXCLUDE=/private/"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        "skipped http://a.test/private/x: URLFILTER_EXCLUDE[0] '/private/' matches"]
    assert run.stdout.strip() == "crawl uf-seed: 1 seed(s) added, 0 already seen"
