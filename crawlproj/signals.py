"""crawlproj's own Scrapy signals."""

#: Sent by the web spider for each HTML page it parsed, before its links are
#: yielded: ``response``, ``title``, ``text`` (the extracted, capped text).
#: The similarity prioritizer counts the page for its IDF estimate and marks
#: it hot on the response's meta.
page_parsed = object()

#: Sent by the robots middleware once it has fetched an origin's robots.txt
#: and knows what it means: ``origin`` (``http://host``), ``body`` (the bytes
#: parsed; None when the origin has none, a 4xx). The sitemaps it names are
#: requested then (crawlproj/sitemaps).
robots_txt_fetched = object()
