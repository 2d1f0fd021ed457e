"""The `Browser` interface, its registry and the browser's scripts (fast, no lab, no browser)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from harness.arms.base import DnsArm
from harness.browser import base, firefox_reused, scripts, session, webdriver_session
from harness.browser.account import BrowserAccount
from harness.browser.base import Browser, PageLoad, register_browser
from harness.browser.firefox import Firefox
from harness.browser.har import PageInfo
from harness.browser.registry import DEFAULT_BROWSER, browser_class, make_browser
from harness.errors import HarnessError
from harness.place import ClientSide
from tests.test_architecture import ROOT, import_graph

CLIENT = ClientSide("x-client", Path("/run/dnsstudy/x"), Path("/run/dnsstudy/x/ca.pem"), "198.18.1.60")


def test_every_script_is_loaded_by_the_session_and_none_is_missing():
    loaded = {
        v
        for module in (session, firefox_reused, webdriver_session)
        for k, v in vars(module).items()
        if k.startswith("_") and isinstance(v, str) and k.isupper()
    }
    on_disk = {scripts.script(name) for name in scripts.names()}
    assert scripts.names() == [
        "await-content-processes",
        "clear-state",
        "page",
        "read-addresses",
        "read-network",
        "read-prefs",
        "resolve",
        "set-prefs",
        "trust-certificate",
        "watch-addresses",
        "watch-network",
    ]
    assert loaded == on_disk  # every file is used, and everything used is a file
    # WebDriver function bodies that hand back a value: returned, or given to the callback of an asynchronous one
    assert all("return" in text or "done(" in text for text in on_disk)


def test_the_scripts_ship_as_package_data():
    """A non-editable install copies only what pyproject.toml names: every script must match it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["harness.browser.scripts"]
    directory = ROOT / "harness" / "browser" / "scripts"
    files = [p.name for p in directory.iterdir() if p.suffix == ".js"]
    assert files and all(any(fnmatch.fnmatch(f, pattern) for pattern in patterns) for f in files)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not any(fnmatch.fnmatch("harness/browser/scripts/page.js", pattern) for pattern in ignored)


def test_the_registry_builds_firefox_by_default_and_refuses_an_unknown_browser_in_one_line():
    assert browser_class(DEFAULT_BROWSER) is Firefox and Firefox.name == "firefox"
    with pytest.raises(HarnessError) as refused:
        make_browser("netscape", CLIENT)
    assert str(refused.value) == "unknown browser 'netscape': choose one of chromium, firefox"


class _Paper(Browser):
    """A browser that loads nothing: what a second implementation needs to provide, and no more."""

    product = "Paper"
    default_browser_dns = "paper-defaults.toml"

    def __init__(self, client, timeout=30.0, margin=10.0, browser_dns=None, page_http3=False):
        super().__init__(client, timeout=timeout, margin=margin, browser_dns=browser_dns, page_http3=page_http3)
        self.version, self.versions = "1.0", {"paper": "1.0"}
        self.dns_settings = {}

    def start(self, arm: DnsArm) -> None:
        pass

    def load(self, url: str) -> PageLoad:
        return PageLoad(page=PageInfo(url=url, title="paper", on_load_ms=1.0))

    def stop(self) -> None:
        pass


@pytest.fixture
def paper(monkeypatch):
    """`_Paper` registered as "paper" for the test only, with a browser account that needs no system user."""
    monkeypatch.setattr(base, "_BROWSERS", dict(base._BROWSERS))
    monkeypatch.setattr(BrowserAccount, "lookup", classmethod(lambda cls: cls("x", 65534, 65534, Path("/x"))))
    register_browser("paper")(_Paper)


def test_a_second_browser_is_a_registered_class_and_its_har_names_it(paper):
    browser = make_browser("paper", CLIENT, timeout=5.0, browser_dns="p.toml")
    assert isinstance(browser, _Paper) and (browser.timeout, browser.margin, browser.browser_dns) == (
        5.0,
        10.0,
        "p.toml",
    )
    assert browser.trusted_ca == CLIENT.ca_file  # a lab's CA is trusted; an Internet side's is not
    assert make_browser("paper", CLIENT).browser_dns == "paper-defaults.toml"  # the base keeps what a study names
    har = browser.har(browser.load("https://a.test/"), "https://a.test/")
    assert har["log"]["browser"] == {"name": "Paper", "version": "1.0"}
    assert har["log"]["pages"][0]["pageTimings"]["onLoad"] == 1.0


def test_every_browser_refuses_a_time_limit_that_is_not_positive(paper):
    with pytest.raises(HarnessError, match=r"timeout and margin must be positive \(got 0 and 10.0\)"):
        make_browser("paper", CLIENT, timeout=0)


def test_the_visitor_knows_browsers_only_through_the_interface():
    """No Firefox module (session, template, preferences) is the visit's to import: a new browser changes
    nothing there."""
    browser_modules = {m for m in import_graph()["harness.visit"] if m.startswith("harness.browser")}
    # starting.py starts any `Browser` (retries, settling) through the interface alone
    assert browser_modules == {
        "harness.browser.base",
        "harness.browser.har",
        "harness.browser.registry",
        "harness.browser.starting",
    }
    assert {m for m in import_graph()["harness.browser.starting"] if m.startswith("harness")} <= {
        "harness.browser.base"
    }
