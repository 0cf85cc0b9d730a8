"""The web app of `scrapy ui`: the search page and its API (crawlproj/ui/app.py)."""
