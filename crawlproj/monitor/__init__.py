"""Watching and steering a running crawl from anywhere: crawl-wide stats and
worker heartbeats (heartbeat.py), crawl control (control.py), and the crawl's
status as one document (status.py) for `scrapy crawlctl`, the dashboard,
/api/status and /metrics (crawlproj/ui/). lua/sync_control.lua is the
frontier sync script's part that obeys control (crawlproj/frontier/frontier.py,
SYNC_PARTS). docs/monitor.md describes it.
"""
