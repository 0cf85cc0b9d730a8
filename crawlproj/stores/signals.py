"""Signals the record middleware sends (Scrapy custom signals: plain objects).

exchange_recorded(exchange)  a download attempt got a response; handlers
                             hold their writes in PendingWrites (stores/pending.py)
attempt_failed(attempt)      a download attempt got no response (DNS, TCP,
                             timeout, robots.txt exclusion, size limit)
"""

exchange_recorded = object()
attempt_failed = object()
