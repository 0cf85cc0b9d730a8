"""Sitemaps: what sites tell crawlers of their URLs (sitemaps.org, 0.9).

A page listed only in a site's sitemap is found by no link; Mercator's
crawler learns of a host's rules from its robots.txt (§3.3), and the same
file names its sitemaps. One job a module:

- ``discovery``: sitemap URLs in a robots.txt, and which URLs a sitemap may
  list (its own origin and directory; a sitemap robots.txt names, its origin
  and that robots.txt's);
- ``parse``: one sitemap file read as a stream within the protocol's limits
  (XML urlset or index, text, gzip told by its magic bytes);
- ``budget``: sitemap files per host for the whole crawl (SITEMAP_MAX_FILES);
- ``lastmod``: a <lastmod> past a scheduled page's last fetch, for the
  incremental crawl's change-rate estimate and schedule;
- ``worker``: a worker's part, which the Scrapy middlewares hand their
  work to;
- ``middleware``: those middlewares (middlewares/sitemaps.py is their entry
  point in the settings).

docs/sitemaps.md has the rules and their settings (SITEMAP_*).
"""
