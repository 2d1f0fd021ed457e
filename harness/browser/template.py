"""The profile template every visit copies: trusts the lab CA, carries the quiet preferences.

Firefox does first-run work in a new profile directory (add-on database), and compiles
its own chrome code (the browser window's scripts and documents) at every start
unless the profile holds the startup caches a clean quit writes. The template
is started once as a visit starts the browser (headless, its full window, under
WebDriver) and quit cleanly, so every visit copies warm caches, as a real user's
profile has: browser start 4.17 -> 2.82 s median, Firefox's parent process
2.80 -> 1.91 s of CPU (interleaved, n = 5, on a loaded 2-core machine). Then
everything a page could leave behind (HTTP cache, cookies, storage, history,
session) is deleted, so each visit still starts with an empty web cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import urllib3
from selenium.common.exceptions import WebDriverException

from harness.browser.account import BrowserAccount
from harness.browser.prefs import user_js
from harness.browser.session import GECKODRIVER, FirefoxSession
from harness.errors import HarnessError, require_program
from harness.paths import FIREFOX

#: How the template is warmed, part of its key: a template warmed another way is built again.
WARM_UP = "full window under WebDriver, clean quit"

#: What a clean quit leaves in the profile directory: compiled chrome scripts of the parent and content processes,
#: and the chrome documents' prototypes.
STARTUP_CACHES = (
    "startupCache/scriptCache.bin",
    "startupCache/scriptCache-child.bin",
    "startupCache/startupCache.8.little",
)
#: Firefox throws its startup caches away when its build changes, and the version string may not.
APPLICATION_INI = Path(FIREFOX).parent / "application.ini"

#: Files and directories that hold web state: removed from the template after warm-up.
WEB_STATE = (
    "cache2",
    "cookies.sqlite",
    "cookies.sqlite-wal",
    "storage",
    "storage.sqlite",
    "webappsstore.sqlite",
    "places.sqlite",
    "places.sqlite-wal",
    "favicons.sqlite",
    "favicons.sqlite-wal",
    "formhistory.sqlite",
    "sessionstore.jsonlz4",
    "sessionstore-backups",
    "sessionCheckpoints.json",
    "permissions.sqlite",
    "content-prefs.sqlite",
    "crashes",
    "minidumps",
    "datareporting",
    "saved-telemetry-pings",
    "lock",
    ".parentlock",
    "thumbnails",
    "shader-cache",
    "SiteSecurityServiceState.bin",
    "SiteSecurityServiceState.txt",
    "AlternateServices.bin",
    "AlternateServices.txt",
    "ClientAuthRememberList.bin",
    "cert_override.txt",
    "protections.sqlite",
    "serviceworker.txt",
    "notificationstore.json",
)


def firefox_version() -> str:
    """`Mozilla Firefox 153.7.0esr` -> `153.7.0esr`."""
    out = subprocess.run([FIREFOX, "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.strip().split()[-1] if out.strip() else "unknown"


def template_key(ca_pem: bytes | None, prefs: dict, version: str) -> str:
    digest = hashlib.sha256()
    digest.update(ca_pem or b"no-ca")
    digest.update(user_js(prefs).encode())
    digest.update(version.encode())
    digest.update(WARM_UP.encode())
    # The build (its caches' validity) and the driver (whose preferences a clean quit leaves in prefs.js).
    digest.update(APPLICATION_INI.read_bytes() if APPLICATION_INI.exists() else b"no-application.ini")
    digest.update(str(GECKODRIVER.resolve()).encode())
    return digest.hexdigest()[:16]


def ensure_template(
    directory: Path, ca_path: Path | None, prefs: dict, account: BrowserAccount, namespace: str | None, version: str
) -> Path:
    """Return a ready template under ``directory``, building it on first use."""
    ca_pem = ca_path.read_bytes() if ca_path else None
    target = directory / f"firefox-template-{template_key(ca_pem, prefs, version)}"
    if (target / "cert9.db").exists() and target.lstat().st_uid == 0:
        return target
    shutil.rmtree(target, ignore_errors=True)  # half-built, or from a version that left it to the browser
    require_program("certutil", "libnss3-tools")
    directory.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".template-", dir=directory))
    try:
        profile_dir = work / "profile"
        profile_dir.mkdir()
        _run(["certutil", "-N", "-d", f"sql:{profile_dir}", "--empty-password"], "create the NSS database")
        if ca_path:
            _run(
                ["certutil", "-A", "-d", f"sql:{profile_dir}", "-n", "dnsstudy lab CA", "-t", "C,,"]
                + ["-i", str(ca_path)],
                "trust the lab CA",
            )
        (profile_dir / "user.js").write_text(user_js(prefs))
        account.give(work)
        _warm(profile_dir, work, account, namespace)
        # geckodriver writes its own preferences into user.js for the session and restores ours after it.
        if (profile_dir / "user.js").read_text() != user_js(prefs):
            raise HarnessError(f"geckodriver did not restore the template's user.js in {profile_dir}")
        for name in WEB_STATE:
            path = profile_dir / name
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
        _seal(profile_dir)
        profile_dir.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _seal(profile_dir: Path) -> None:
    """Hand the template to root, read-only for everyone else: a compromised visit, running as the browser
    account, cannot change the preferences or trusted CAs every later visit copies. Links are not followed."""
    for root, dirs, files in os.walk(profile_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            os.lchown(path, 0, 0)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if name in dirs else 0o644)
    os.lchown(profile_dir, 0, 0)
    os.chmod(profile_dir, 0o755)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"cannot {what}: {argv[0]} said: {done.stderr.strip() or done.stdout.strip()}")


def _warm(profile_dir: Path, work: Path, account: BrowserAccount, namespace: str | None) -> None:
    """Start Firefox once on the template as a visit does, and quit it cleanly (it writes its caches)."""
    session = FirefoxSession(account, profile_dir, namespace, work, timeout=60, margin=30)
    try:
        session.warm(profile_dir, work)
    except (WebDriverException, RuntimeError, OSError, urllib3.exceptions.HTTPError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"Firefox did not finish its first start in the profile template: {first}") from exc
    if not (profile_dir / "prefs.js").exists():
        raise HarnessError(f"Firefox did not initialise the profile template in {profile_dir}")
    missing = [name for name in STARTUP_CACHES if not _nonempty(profile_dir / name)]
    if missing:
        raise HarnessError(f"Firefox quit without writing {', '.join(missing)} in the profile template {profile_dir}")


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False
