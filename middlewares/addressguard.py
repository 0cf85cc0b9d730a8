"""The address guard on every download: the entry point of
``middlewares.addressguard.AddressGuardMiddleware``; the feature is crawlproj/addressguard."""

from crawlproj.addressguard.middleware import AddressGuardMiddleware

__all__ = ["AddressGuardMiddleware"]
