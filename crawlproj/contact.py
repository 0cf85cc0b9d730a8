"""The crawl's User-Agent, naming whom a site's owner can reach.

Mercator's operators heard from web server administrators whenever a crawl
was too rude for them (Najork & Heydon 2001, §3.1); an administrator can only
complain to, or ask to be left alone by, a crawler that says who runs it.
Koster's Guidelines for Robot Writers (cited by Pinkerton 1994) ask the same:
identify the robot and give a way to reach its operator.

The User-Agent a worker sends is ``crawlproj/VERSION (+CRAWL_CONTACT)``:
the product token that robots.txt groups name (``User-agent: crawlproj``),
then the operator's contact, a URL or an e-mail address. Left unset,
CRAWL_CONTACT gives ``crawlproj/VERSION`` alone and the web spider says so
in one warning when it starts. A USER_AGENT set anywhere above Scrapy's own
default (settings module, ``-s``, a Scrapyd job) is sent as it is.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from scrapy.settings import SETTINGS_PRIORITIES

__all__ = ["PRODUCT", "product", "user_agent", "lay_user_agent", "missing_contact"]

PRODUCT = "crawlproj"


def product() -> str:
    """``crawlproj/VERSION``, or ``crawlproj`` where the package carries no
    metadata of its own (a Scrapyd egg is named after its build, not us)."""
    try:
        return f"{PRODUCT}/{version(PRODUCT)}"
    except PackageNotFoundError:
        return PRODUCT


def user_agent(contact: str | None) -> str:
    """The User-Agent for an operator reached at ``contact`` (None or blank: none)."""
    contact = contact.strip() if contact else ""
    return f"{product()} (+{contact})" if contact else product()


def _operator_set_user_agent(settings) -> bool:
    priority = settings.getpriority("USER_AGENT")
    return priority is not None and priority > SETTINGS_PRIORITIES["default"]


def lay_user_agent(settings) -> None:
    """USER_AGENT from CRAWL_CONTACT, at Scrapy's default priority, unless the
    operator set USER_AGENT; before any component reads it (the downloader's
    UserAgentMiddleware, robots.txt matching, crawlproj/robots/middleware.py)."""
    if not _operator_set_user_agent(settings):
        settings.set("USER_AGENT", user_agent(settings.get("CRAWL_CONTACT")), priority="default")


def missing_contact(settings) -> str | None:
    """One line telling the operator to name a contact, or None when the
    User-Agent has one (or is the operator's own)."""
    contact = settings.get("CRAWL_CONTACT")
    if _operator_set_user_agent(settings) or (contact and str(contact).strip()):
        return None
    return (f"CRAWL_CONTACT is not set: the User-Agent {settings.get('USER_AGENT')!r} tells "
            "site owners nothing of whom to reach; set it to a URL or e-mail address of "
            "yours (-s CRAWL_CONTACT=https://example.org/about-my-crawl)")
