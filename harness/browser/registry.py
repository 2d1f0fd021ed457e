"""The browsers a visit can run in, by name: every implementation is imported here, where it registers itself.

A new browser is a module with a `Browser` subclass decorated with
`register_browser` (harness/browser/base.py), and one import line below.
"""

from __future__ import annotations

from pathlib import Path

from harness.browser import chromium, firefox  # noqa: F401 -- register "chromium" and "firefox"
from harness.browser.base import Browser, SessionPolicy, registered_browsers
from harness.errors import HarnessError
from harness.place import ClientSide

#: The browser a visit runs in when none is named.
DEFAULT_BROWSER = "firefox"


def browser_names() -> list[str]:
    """The registered browsers' names, sorted (what a study's `browsers` may list)."""
    return sorted(registered_browsers())


def browser_class(name: str) -> type[Browser]:
    """The browser called ``name``; a one-line error naming those that exist."""
    try:
        return registered_browsers()[name]
    except KeyError:
        have = ", ".join(browser_names())
        raise HarnessError(f"unknown browser '{name}': choose one of {have}") from None


def launch_group(browser: str, resolver: str, protocol: str) -> str:
    """The configurations one running ``browser`` serves in turn (`Browser.launch_group`; harness/plan.py)."""
    return browser_class(browser).launch_group(protocol, resolver)


def make_browser(
    name: str,
    client: ClientSide,
    timeout: float = 30.0,
    margin: float = 10.0,
    browser_dns: str | Path | None = None,
    session: SessionPolicy | None = None,
    page_http3: bool = False,
) -> Browser:
    """The browser ``name``, ready to start in ``client``'s namespace; ``browser_dns`` names the DNS settings
    it pins (None: the browser's own default profile); ``page_http3``: the page may use HTTP/3."""
    cls = browser_class(name)
    if session is not None and session.reused:
        if not cls.reusable:
            raise HarnessError(f"browser {name}: it cannot serve many visits (browser_session = 'reused')")
        return cls(
            client, timeout=timeout, margin=margin, browser_dns=browser_dns, session=session, page_http3=page_http3
        )
    return cls(client, timeout=timeout, margin=margin, browser_dns=browser_dns, page_http3=page_http3)
