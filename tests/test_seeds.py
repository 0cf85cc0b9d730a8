"""crawlproj.seeds: the `-a seeds=PATH_OR_URLS` argument."""

from __future__ import annotations

import os

import pytest

from crawlproj.errors import CrawlprojError
from crawlproj.seeds import MAX_URL_LENGTH, SeedsError, check_seed, looks_like_path, read_seeds


def write(tmp_path, text: str | bytes, name: str = "seeds.txt") -> str:
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return str(path)


def test_file_with_comments_blank_lines_and_problems(tmp_path):
    path = write(
        tmp_path,
        "# my seeds\n"
        "http://a.example/\n"
        "\n"
        "   https://b.example/x?y=1   \n"
        "ftp://x\n"
        "  # indented comment\n"
        "example.com\n"
        "http://c.example/page  # trailing comment\n"
        "http://exa mple.com/\n"
        "mailto:me@example.com\n"
        "http://a.example/\n"
        "http//d.example/page\n"
        "intranet/x\n",
    )
    urls, problems = read_seeds(path)
    assert urls == [
        "http://a.example/",
        "https://b.example/x?y=1",
        "http://example.com/",      # a bare domain name, as in a pasted list of domains
        "http://c.example/page",
    ]
    assert problems == [
        f"{path}:5: not an http(s) URL: 'ftp://x'",
        f"{path}:9: contains whitespace: 'http://exa mple.com/'",
        f"{path}:10: not an http(s) URL: 'mailto:me@example.com'",
        f"{path}:12: no scheme: 'http//d.example/page' (did you mean 'http://d.example/page'?)",
        f"{path}:13: no scheme: 'intranet/x' (did you mean 'http://intranet/x'?)",
    ]


def test_problem_names_the_path_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "http://ok.example/\n" * 6 + "ftp://x\n")
    urls, problems = read_seeds("seeds.txt")
    assert urls == ["http://ok.example/"]  # duplicates dropped
    assert problems == ["seeds.txt:7: not an http(s) URL: 'ftp://x'"]


def test_comma_separated_urls():
    urls, problems = read_seeds("http://a.example/, https://b.example/p ,HTTP://c.example,,ftp://d")
    assert urls == ["http://a.example/", "https://b.example/p", "http://c.example/"]
    assert problems == ["seeds[5]: not an http(s) URL: 'ftp://d'"]


@pytest.mark.parametrize("arg, fix", [
    ("http//host.example/page", "http://host.example/page"),   # the colon missing
    ("https//host.example/", "https://host.example/"),
    ("example.org", "http://example.org"),
    ("example.org/page", "http://example.org/page"),
    ("localhost:8080", "http://localhost:8080"),
    ("//cdn.example.org/x", "http://cdn.example.org/x"),
])
def test_an_argument_neither_a_file_nor_a_url_with_a_scheme_is_refused(arg, fix):
    """Read as a host, `http//host/page` crawled a host named http: the
    argument is a file that exists, or URLs that say their scheme."""
    with pytest.raises(SeedsError) as info:
        read_seeds(arg)
    assert str(info.value) == (f"seeds {arg!r} is neither an existing file nor a URL with a "
                               f"scheme (did you mean {fix!r}?)")


def test_a_listed_url_without_a_scheme_refuses_the_argument():
    with pytest.raises(SeedsError) as info:
        read_seeds("http://a.example/,b.example/x,https://c.example/")
    assert str(info.value) == ("seeds[2] 'b.example/x' is not a URL with a scheme (did you "
                               "mean 'http://b.example/x'?)")


def test_single_url():
    assert read_seeds("https://example.org/start") == (["https://example.org/start"], [])
    assert read_seeds("http:example.org/") == (["http://example.org/"], [])  # as browsers read it


@pytest.mark.parametrize(
    "entry, reason",
    [
        ("ftp://x", "not an http(s) URL"),
        ("file:///etc/passwd", "not an http(s) URL"),
        ("javascript:alert(1)", "not an http(s) URL"),
        ("http://", "no host"),
        ("http://x:99999/", "invalid URL"),
        ("http://exa mple.com/", "contains whitespace"),
        ("http://a\tb.com/", "contains whitespace"),
        # What the URL Standard's host parser rejects (crawlproj.urls).
        ("http://[broken", "invalid host name '[broken'"),
        ("http://127.999.1.1/", "invalid host name"),
        ("http://127.0.0.256/", "invalid host name"),
        ("http://foo.09/", "invalid host name"),  # ends in a number: not IPv4
        ("http://a|b.example/", "invalid host name"),
        ("http://%zz.example/", "invalid host name"),
        ("http://x.com/" + "p" * MAX_URL_LENGTH, "URL longer than"),
    ],
)
def test_invalid_entries(entry, reason):
    url, problem = check_seed(entry)
    assert url is None
    assert problem.startswith(reason), problem


@pytest.mark.parametrize(
    "entry, url",
    [
        # The URL a browser fetches: the URL Standard's spelling.
        ("http://EXAMPLE.com/A", "http://example.com/A"),
        ("https://example.com/#frag", "https://example.com/"),
        ("http://127.0.2.1/", "http://127.0.2.1/"),
        ("http://[2001:db8::1]:8080/", "http://[2001:db8::1]:8080/"),
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://faß.example/", "http://xn--fa-hia.example/"),  # UTS #46, not "fass"
        ("http://user:pw@example.com/", "http://user:pw@example.com/"),
        ("http://example.com./", "http://example.com./"),
        ("http://example.com:80/", "http://example.com/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://%41.example/", "http://a.example/"),
        # Host names browsers fetch though they are not LDH names.
        ("http://bad_host.example/", "http://bad_host.example/"),
        ("http://-bad-.example/", "http://-bad-.example/"),
        ("http://a..b/", "http://a..b/"),
        ("http://" + "a" * 64 + ".com/", "http://" + "a" * 64 + ".com/"),
        ("http:///path", "http://path/"),
    ],
)
def test_valid_entries(entry, url):
    assert check_seed(entry) == (url, None)


def test_missing_file_is_one_line_error(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(SeedsError) as info:
        read_seeds(missing)
    assert isinstance(info.value, CrawlprojError)
    assert str(info.value) == f"seeds file not found: {missing!r}"
    assert "\n" not in str(info.value)
    # Relative names that look like paths are paths too.
    with pytest.raises(SeedsError):
        read_seeds("seeds.txt")
    with pytest.raises(SeedsError):
        read_seeds(f"some{os.sep}dir{os.sep}list")


def test_directory_is_an_error(tmp_path):
    with pytest.raises(SeedsError, match="directory"):
        read_seeds(str(tmp_path))


def test_looks_like_path(tmp_path):
    existing = write(tmp_path, "http://a.example/\n", name="list")
    assert looks_like_path(existing)
    assert looks_like_path("seeds.txt") and looks_like_path("SEEDS.TXT")
    assert looks_like_path(f"dir{os.sep}file")
    assert not looks_like_path("http://a.example/x.txt")
    assert not looks_like_path("https://a.example/dir/page")
    assert not looks_like_path("example.com")
    assert not looks_like_path("a.example,b.example")
    assert not looks_like_path("a.example/x,b.example/y")


def test_encoding_bom_and_bad_bytes(tmp_path):
    body = b"\xef\xbb\xbfhttp://a.example/\r\nhttp://b.example/\xff\r\nhttp://c.example/\n"
    path = write(tmp_path, body)
    urls, problems = read_seeds(path)
    assert urls == ["http://a.example/", "http://c.example/"]
    assert problems == [f"{path}:2: not UTF-8 text"]


def test_an_argument_without_a_usable_url_is_one_line_error(tmp_path):
    """A crawl started with it would have nothing to do: refused, naming the
    first problem."""
    with pytest.raises(SeedsError, match="^the seeds argument is empty$"):
        read_seeds(" ")
    empty = write(tmp_path, "# only comments\n\n")
    with pytest.raises(SeedsError) as info:
        read_seeds(empty)
    assert str(info.value) == f"no usable seed URL in {empty!r}: it lists none"
    with pytest.raises(SeedsError, match=r"^no usable seed URL in ', ,': it lists none$"):
        read_seeds(" , ,")
    bad = write(tmp_path, "ftp://a.example/\nmailto:x@a.example\nhttp://\n", name="bad.txt")
    with pytest.raises(SeedsError) as info:
        read_seeds(bad)
    assert str(info.value) == (f"no usable seed URL in {bad!r}: {bad}:1: not an http(s) URL: "
                               "'ftp://a.example/' (and 2 more)")


def test_one_bare_word_is_a_file_name_not_a_host(tmp_path, monkeypatch):
    """`-a seeds=myseeds` for a missing file must not crawl http://myseeds/."""
    monkeypatch.chdir(tmp_path)
    assert looks_like_path("myseeds") and looks_like_path("seeds_2024")
    with pytest.raises(SeedsError) as info:
        read_seeds("myseeds")
    assert str(info.value) == "seeds file not found: 'myseeds' (URLs need their scheme: http://...)"
    (tmp_path / "myseeds").write_text("http://a.example/\n")
    assert read_seeds("myseeds") == (["http://a.example/"], [])
    # a URL says its scheme
    assert read_seeds("http://intranet/")[0] == ["http://intranet/"]


@pytest.mark.slow
def test_large_file_is_quick(tmp_path):

    path = write(tmp_path, "".join(f"http://host{i}.example/page/{i}\n" for i in range(100_000)))
    urls, problems = read_seeds(path)
    assert len(urls) == 100_000 and not problems
