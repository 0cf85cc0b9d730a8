"""The trap guard's near-duplicate pages per host, a spider middleware: the entry
point of ``middlewares.trapguard.NearDuplicateHostsMiddleware``; the feature is
crawlproj/traps."""

from crawlproj.traps.middleware import NearDuplicateHostsMiddleware

__all__ = ["NearDuplicateHostsMiddleware"]
