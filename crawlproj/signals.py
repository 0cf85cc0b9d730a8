"""crawlproj's own Scrapy signals."""

#: Sent by the web spider for each HTML page it parsed, before its links are
#: yielded: ``response``, ``title``, ``text`` (the extracted, capped text).
#: The similarity prioritizer counts the page for its IDF estimate and marks
#: it hot on the response's meta.
page_parsed = object()
