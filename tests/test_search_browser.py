"""The search page in a real headless browser: Debian's chromium, driven by
Playwright, against `scrapy ui` serving an index of simulated-web pages.

Without a chromium the tests skip, saying why, except in CI (.ci/run installs
chromium and sets BROWSER_TESTS=required), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from crawlproj.redis.embedded import free_port
from crawlproj.search.document import Document
from crawlproj.search.index import PageIndex
from crawlproj.search.indexer import Indexer
from tests.e2e import ROOT
from tests.test_search import T0, web_documents

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("BROWSER_TESTS") == "required"


def _need_browser():
    reason = None
    if CHROMIUM is None:
        reason = "no chromium on PATH (Debian: apt-get install chromium; or set CHROMIUM_PATH)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "Playwright is not installed (pip install -e '.[test]')"
    if reason:
        if REQUIRED:
            pytest.fail(f"browser tests required here: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    _need_browser()
    tmp = tmp_path_factory.mktemp("browser")
    docs = web_documents(pages=120, hosts=6)
    docs += [Document("http://umlaut.example/", "Grüße aus Köln", "Straßenbahn und Dom", T0),
             Document("http://evil.example/", "<script>document.title='pwned'</script> melon",
                      "melon <img src=x onerror=\"document.title='pwned'\"> seeds", T0),
             Document("http://fox.example/a", "", "the quick red fox", T0),
             Document("http://fox.example/b", "", "a red and quick fox", T0)]
    index = PageIndex(tmp / "index", write=True)
    indexer = Indexer(index, None)
    indexer.write(docs)
    indexer.maybe_rank(force=True)
    index.close()
    port = free_port()
    env = dict(os.environ, CRAWLPROJ_INDEX_DIR=str(tmp / "index"))
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert str(port) in line, line + proc.stderr.read()
    yield {"base": f"http://127.0.0.1:{port}", "docs": docs}
    proc.terminate()
    proc.wait(30)


@pytest.fixture(scope="module")
def browser(site):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context()
    pg = ctx.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()


def search(page, site, q):
    page.goto(site["base"] + "/")
    page.fill("input[name=q]", q)
    page.press("input[name=q]", "Enter")
    page.wait_for_load_state("load")


def test_a_query_shows_results_and_the_next_page(page, site):
    word = site["docs"][0].title.split()[0]
    search(page, site, word)
    titles = page.locator(".results a.title")
    assert titles.count() >= 1
    assert page.locator(".results mark").first.inner_text().lower() == word
    assert "fetched" in page.locator(".results .meta").first.inner_text()
    # a common word: enough results for a second page
    search(page, site, "quick OR " + " OR ".join(d.title.split()[0] for d in site["docs"][:40]))
    first = page.locator(".results a.title").all_inner_texts()
    assert len(first) == 10
    page.click("a[rel=next]")
    page.wait_for_load_state("load")
    second = page.locator(".results a.title").all_inner_texts()
    assert second and not set(first) & set(second)
    assert "Results 11-" in page.locator(".summary").inner_text()


def test_no_results(page, site):
    search(page, site, "xylophonequartz")
    assert "No pages match" in page.locator(".summary").inner_text()
    assert page.locator(".results li").count() == 0


def test_a_quoted_phrase(page, site):
    search(page, site, '"quick red fox"')
    assert page.locator(".results .url").all_inner_texts() == ["http://fox.example/a"]
    search(page, site, "quick red fox")
    assert sorted(page.locator(".results .url").all_inner_texts()) == ["http://fox.example/a",
                                                                      "http://fox.example/b"]


def test_non_ascii(page, site):
    search(page, site, "köln")
    assert page.locator(".results a.title").all_inner_texts() == ["Grüße aus Köln"]
    assert page.input_value("input[name=q]") == "köln"


def test_script_in_pages_and_queries_never_runs(page, site):
    search(page, site, "melon")
    assert page.title() != "pwned"
    assert "<script>" in page.locator(".results a.title").first.inner_text()  # shown as text
    search(page, site, "<script>document.title='pwned'</script>")
    assert page.title() != "pwned" and page.errors == []
    assert "syntax error" in page.locator(".summary").inner_text()
