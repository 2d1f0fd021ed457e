"""Whether a warmed user-data directory shortens Chromium's start, as Firefox's profile template did.

Three variants, interleaved session by session; each session is a visit's browser
(`ChromiumSession`: the browser account in the lab's client namespace, chromedriver,
headless Chromium with a Do53 visit's switches and Local State) loading about:blank
and quitting cleanly:

- empty: what every visit gets (Local State and Default/Preferences only);
- stripped: a copy of a user-data directory Chromium has started in once (about:blank)
  and quit cleanly, with everything that may hold web state removed (`WEB_STATE`):
  what a template that keeps visits apart could hold;
- warmed: the same copy unstripped (only the lock and port files of the browser that
  wrote it removed): an upper bound, not usable, since it keeps the cookie, history,
  HTTP-cache and GPU-cache stores a page writes into.

Prints per variant the medians of browser start, its new session, and the CPU of what
chromedriver reaped (Chromium and its processes, start to clean quit); then each
variant's change against empty, paired by round, with a bootstrap 95 % interval.

    .venv/bin/python -m benchmarks.chromium_start [--sessions 30] [--prefix dsbench --subnet 198.18.16.0/23]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
from pathlib import Path

from selenium import webdriver

from benchmarks.benchlab import add_lab_arguments, fresh_lab
from harness.browser.chromium import Chromium
from harness.browser.chromium_session import ChromiumSession
from harness.browser.chromium_settings import local_state

#: What the first start writes that may hold web state (under Default/ unless the name says otherwise).
WEB_STATE = (
    # the network's memory: HTTP cache, cookies, HSTS, alt-svc/QUIC and NEL hints, trust tokens, dictionaries
    "Default/Cache", "Default/Cookies", "Default/Cookies-journal", "Default/Network", "Default/TransportSecurity",
    "Default/Network Persistent State", "Default/Reporting and NEL", "Default/Reporting and NEL-journal",
    "Default/Trust Tokens", "Default/Trust Tokens-journal", "Default/Shared Dictionary",
    "Default/SCT Auditing Pending Reports", "Default/ServerCertificate", "Default/ServerCertificate-journal",
    "Default/ClientCertificates",
    # code and shaders compiled from pages (a page's WebGL/WebGPU shaders land in the GPU caches)
    "Default/Code Cache", "Default/GPUCache", "Default/DawnGraphiteCache", "Default/DawnWebGPUCache",
    "GPUPersistentCache",
    # sites' storage
    "Default/Local Storage", "Default/Session Storage", "Default/IndexedDB", "Default/Service Worker",
    "Default/File System", "Default/blob_storage", "Default/databases", "Default/shared_proto_db",
    "Default/SharedStorage", "Default/Storage", "Default/PersistentOriginTrials",
    "Default/Site Characteristics Database",
    "Default/Platform Notifications", "Default/BudgetDatabase", "Default/DIPS", "Default/InterestGroups",
    "Default/Conversions", "Default/AggregationService", "Default/PrivateAggregation", "Default/BrowsingTopicsState",
    "Default/BrowsingTopicsSiteData", "Default/MediaDeviceSalts", "Default/first_party_sets.db",
    # what the user did: history, tabs, forms, passwords, page metrics
    "Default/History", "Default/History-journal", "Default/Favicons", "Default/Favicons-journal", "Default/Top Sites",
    "Default/Top Sites-journal", "Default/Visited Links", "Default/Network Action Predictor", "Default/Shortcuts",
    "Default/Sessions", "Default/Sessions_Encrypted", "Default/Web Data", "Default/Web Data-journal",
    "Default/Account Web Data", "Default/Account Web Data-journal", "Default/Login Data", "Default/Login Data-journal",
    "Default/Login Data For Account", "Default/Login Data For Account-journal", "Default/Affiliation Database",
    "Default/Affiliation Database-journal", "Default/Segmentation Platform", "segmentation_platform",
    "Default/declarative_performance_observer.db", "Default/declarative_performance_observer.db-journal",
    "Default/heavy_ad_intervention_opt_out.db", "Default/optimization_guide_hint_cache_store",
    "Default/chrome_cart_db", "Default/commerce_subscription_db", "Default/discount_infos_db", "Default/discounts_db",
    "Default/parcel_tracking_db", "Default/Sync Data", "Default/Extension State", "Default/Extension Rules",
    "Default/Extension Scripts", "Safe Browsing", "component_crx_cache", "OptimizationGuideModelsManifest",
)  # fmt: skip
#: The lock and port files of the browser that wrote the directory: never copied.
RUNNING = (
    "DevToolsActivePort",
    "SingletonLock",
    "SingletonSocket",
    "SingletonCookie",
    "chrome_debug.log",
    "Default/LOCK",
)
VARIANTS = ("empty", "stripped", "warmed")


class _Session(ChromiumSession):
    """A visit's session whose user-data directory is a copy of ``source`` (None: empty, as a visit's today);
    it keeps the CPU chromedriver's reaped children used, and, with ``keep``, a copy of the quit browser's
    user-data directory."""

    source: Path | None = None
    keep: Path | None = None
    cpu_s = 0.0

    def _prepare(self, work: Path) -> Path:
        if self.source is None:
            return super()._prepare(work)
        shutil.copytree(self.template, work / "home" / ".pki" / "nssdb")
        user_data = work / "user-data"
        shutil.copytree(self.source, user_data, symlinks=True)
        _merge_json(user_data / "Local State", self.local_state)  # the arm's secure DNS, as a visit writes it
        _merge_json(user_data / "Default" / "Preferences", self.preferences)
        self.account.give(work)
        return user_data

    def _read_netlog(self, driver: webdriver.Remote) -> None:
        super()._read_netlog(driver)  # after the clean quit: chromedriver has reaped the browser
        if self._driver_proc is not None:
            fields = Path(f"/proc/{self._driver_proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            self.cpu_s = sum(int(x) for x in fields[13:15]) / os.sysconf("SC_CLK_TCK")  # cutime + cstime

    def stop(self) -> None:
        if self.keep is not None and self._work is not None:
            shutil.copytree(self._work / "user-data", self.keep, symlinks=True)
        super().stop()


def _merge_json(path: Path, values: dict) -> None:
    """Write ``values`` into the JSON file at ``path`` (nested keys merged), as a visit's copy would."""
    data = json.loads(path.read_text()) if path.exists() else {}
    _merge(data, values)
    path.write_text(json.dumps(data))


def _merge(into: dict, values: dict) -> None:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _session(browser: Chromium, dns_state: dict, source: Path | None) -> _Session:
    session = _Session(
        browser.account,
        browser.nssdb,
        browser.client.namespace,
        browser.work_root,
        switches=browser.study_switches,  # as a visit's, the place's QUIC hosts included
        local_state=dns_state,
        preferences=browser.settings.preferences(),
        read_settings={},
        timeout=30,
    )
    session.source = source
    return session


def _remove(root: Path, names: tuple[str, ...]) -> None:
    for name in names:
        path = root / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)


def _sources(browser: Chromium, dns_state: dict, directory: Path) -> dict[str, Path | None]:
    """The user-data directory of one start on about:blank and clean quit, stripped and not."""
    first = _session(browser, dns_state, None)
    first.keep = directory / "first"
    first.run("about:blank")
    warmed, stripped = directory / "warmed", directory / "stripped"
    shutil.copytree(first.keep, warmed, symlinks=True)
    _remove(warmed, RUNNING)
    shutil.copytree(warmed, stripped, symlinks=True)
    _remove(stripped, WEB_STATE)
    print("the first start wrote:", *sorted(str(p.relative_to(first.keep)) for p in first.keep.iterdir()))
    print("kept when stripped:", *sorted(str(p.relative_to(stripped)) for p in stripped.rglob("*")))
    return {"empty": None, "stripped": stripped, "warmed": warmed}


#: Bootstrap resamples of each paired change: its 2.5th and 97.5th percentiles are the 95 % interval.
RESAMPLES = 2000


def _paired_change(rows: dict[str, list[dict]], variant: str, key: str) -> tuple[float, float, float]:
    """Median of variant/empty - 1 over rounds, and a bootstrap 95 % interval of that median."""
    ratios = [b[key] / a[key] - 1 for a, b in zip(rows["empty"], rows[variant], strict=True)]
    rng = random.Random(1)
    boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES))
    return statistics.median(ratios), boot[int(0.025 * RESAMPLES)], boot[int(0.975 * RESAMPLES) - 1]


def _print(rows: dict[str, list[dict]]) -> None:
    keys = ("browser_start", "browser_start.session", "cpu")
    print(f"\n{'variant':10}{'n':>4}" + "".join(f"{k:>24}" for k in keys))
    for name, found in rows.items():
        print(f"{name:10}{len(found):4}" + "".join(f"{statistics.median(r[k] for r in found):24.3f}" for k in keys))
    for name in VARIANTS[1:]:
        for key in keys:
            mid, low, high = _paired_change(rows, name, key)
            print(f"{name} against empty, {key}: {mid:+.1%} (95 % interval {low:+.1%} .. {high:+.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30, help="sessions per variant")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.visit import Visitor

    lab = fresh_lab(args)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            visitor = Visitor(lab, Path(tmp), browser="chromium")
            browser = visitor.browser
            assert isinstance(browser, Chromium)
            dns_state = local_state(visitor.arm("do53", "near").browser_dns())
            sources = _sources(browser, dns_state, Path(tmp))
            rows: dict[str, list[dict]] = {name: [] for name in VARIANTS}
            for i in range(args.sessions):
                # A round only counts whole (the comparison is paired by round), in an order of its own.
                for name in random.sample(list(VARIANTS), len(VARIANTS)):
                    session = _session(browser, dns_state, sources[name])
                    report = session.run("about:blank")
                    if report.driver_failure:
                        raise SystemExit(f"{name}: {report.driver_failure}")
                    rows[name].append({**report.phases, "cpu": session.cpu_s})
                print(f"round {i + 1}/{args.sessions}", flush=True)
            _print(rows)
    finally:
        lab.down()


if __name__ == "__main__":
    main()
