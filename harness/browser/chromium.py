"""Chromium through chromedriver: a fresh browser, on a fresh user-data directory, for every visit, or one for
many visits (`browser_session = "reused"`, harness/browser/chromium_reused.py).

Its DNS: the study's settings (profiles/chromium/, harness/browser/chromium_settings.py) and the
arm's `BrowserDns` (secure DNS "secure" for DoH, "off" otherwise: the built-in resolver on the client
namespace's resolv.conf). DoT, DoQ and DoH3 reach it through the arms' stubs, like Firefox's DoT and DoQ.
Each visit runs in a `ChromiumSession` (harness/browser/chromium_session.py) as the browser account,
with Chromium's own sandbox, trusting the place's CA through an NSS database made once per place, and over QUIC
for the hosts the place names (`ClientSide.quic_ca_hosts`, harness/browser/chromium_quic.py).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness import netns
from harness.browser.base import SessionPolicy, register_browser
from harness.browser.chromium_netlog import CHROMIUM_OWN_NAMES
from harness.browser.chromium_quic import SWITCH, with_quic_ca_hosts
from harness.browser.chromium_reused import ReusedChromiumSession, describe_launch, launch_settings
from harness.browser.chromium_session import CHROMEDRIVER, CHROMIUM, ChromiumSession
from harness.browser.chromium_settings import (
    CHROMIUM_DNS_CURRENT,
    ChromiumDns,
    arm_switches,
    load_chromium_dns,
    local_state,
)
from harness.browser.reused import restart_reason
from harness.browser.webdriver_browser import WebDriverBrowser
from harness.errors import HarnessError, require_program
from harness.place import ClientSide

if TYPE_CHECKING:
    from harness.arms.base import DnsArm

#: Switches every visit gets, whatever the study: headless, quiet, no first-run work. chromedriver adds its own
#: (--disable-background-networking, --disable-sync, --no-first-run, ...). Never --no-sandbox, never
#: --ignore-certificate-errors.
QUIET = ["--disable-component-update", "--disable-domain-reliability", "--no-default-browser-check"]
#: Features every visit has off, whatever the study: Chromium 156 draws its omnibox's popups as WebUI, each in a
#: renderer of its own made with every new window, and a reused browser's visit is a new window (its user
#: context): 0.5 s of a core just as the page began to load, which then took 1.5x its time (docs/visit.md, "A
#: new tab's renderer"). A headless browser shows no omnibox.
QUIET_FEATURES_OFF = ["WebUIOmniboxPopup", "WebUIOmniboxAimPopup"]
DISABLE_FEATURES = "--disable-features="


def program_version(program: str) -> str:
    """`Chromium 156.0.8078.108 built on ...` or `ChromeDriver 156.0.8078.108 (...)` -> `156.0.8078.108`."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
    except OSError:
        return "unknown"
    return out[1] if len(out) > 1 else "unknown"


@register_browser("chromium")
class Chromium(WebDriverBrowser):
    """Chromium, started afresh for each visit and killed after it, or (a reused session) started once and given
    a new user context for each visit, replaced when a visit's arm needs other DNS launch settings."""

    product = "Chromium"
    default_browser_dns = CHROMIUM_DNS_CURRENT
    native_dns = frozenset({"doh"})  # secure DNS over HTTP/2; no DoT, DoQ or DNS over HTTP/3 of its own
    own_names = CHROMIUM_OWN_NAMES
    reusable = True

    @classmethod
    def launch_group(cls, protocol: str, resolver: str) -> str:
        """Chromium's DNS is fixed at launch (harness/browser/chromium_reused.py): secure DNS per resolver, the
        built-in resolver per name server; the stub arms share one name server, the stub on loopback."""
        if protocol in cls.native_dns:
            return f"{protocol} {resolver}"
        return f"do53 {resolver}" if protocol == "do53" else "stub"

    def __init__(
        self,
        client: ClientSide,
        timeout: float = 30.0,
        margin: float = 10.0,
        browser_dns: str | Path | None = None,
        session: SessionPolicy | None = None,
        page_http3: bool = False,
    ):
        for program, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
            if not Path(program).exists():
                raise HarnessError(f"{program} is missing: install {package} (scripts/setup.sh)")
        super().__init__(
            client, timeout=timeout, margin=margin, browser_dns=browser_dns, session=session, page_http3=page_http3
        )
        self.settings = load_chromium_dns(self.browser_dns)
        self.dns_settings = self.settings.as_dict()
        # The same for every visit (no reused browser is replaced for them); built here, so that a list of hosts
        # too long for one argument fails before any visit.
        self.study_switches = study_switches(self.settings, client, page_http3, self.browser_dns)
        self.version = program_version(CHROMIUM)
        self.versions = {"chromium": self.version, "chromedriver": program_version(CHROMEDRIVER)}
        _require_sandbox(self.account.setpriv(["unshare", "--user", "true"]), client.namespace)
        self.work_root = client.run_dir / "visits"
        self.work_root.mkdir(exist_ok=True)
        self.nssdb = ensure_nssdb(client.run_dir, self.trusted_ca)
        self._session: ChromiumSession | None = None
        self._reused: ReusedChromiumSession | None = None

    def unexpected_version(self) -> str | None:
        if self.version.startswith(self.settings.version):
            return None
        return (
            f"warning: Chromium {self.version} is installed, but {self.browser_dns} was read from "
            f"{self.settings.version}: its DNS defaults may differ"
        )

    def start(self, arm: DnsArm) -> None:
        """A new browser with the arm's DNS settings, its watchdog running; or, reused, the running one (a new one
        when `restart_reason` says so, or when the arm needs other DNS launch settings: the arm has written the
        namespace's resolv.conf already) with a new user context."""
        if self.session.reused:
            self._start_reused(arm)
            return
        self.session_ordinal = 1
        self._session = ChromiumSession(*self._session_args(), **self._session_kwargs(arm))
        self._session.start()

    def _session_args(self) -> tuple:
        return (self.account, self.nssdb, self.client.namespace, self.work_root)

    def _session_kwargs(self, arm: DnsArm) -> dict:
        dns = arm.browser_dns()
        return {
            "switches": self.study_switches + arm_switches(dns),
            "local_state": local_state(dns),
            "preferences": self.settings.preferences(),
            "read_settings": {s.name: s.kind for s in self.settings.setting},
            "timeout": self.timeout,
            "margin": self.margin,
        }

    def _start_reused(self, arm: DnsArm) -> None:
        kwargs = {**self._session_kwargs(arm), "nameservers": self.client.nameservers()}
        launch = launch_settings(kwargs["switches"], kwargs["local_state"], kwargs["nameservers"])
        reason = restart_reason(self._reused, self.session)
        if reason is None and self._reused is not None and self._reused.launch != launch:
            reason = f"{describe_launch(self._reused.launch)} to {describe_launch(launch)}"
        if self._reused is None or reason is not None:
            self.close()
            self._reused = ReusedChromiumSession(*self._session_args(), **kwargs)
            self._reused.start()
            self.warmup = self._reused.warmup.to_dict() if self._reused.warmup else None
            self.session_ordinal = 0
        self.restart_reason = reason
        self.session_ordinal += 1
        self._reused.begin_visit({"launch": launch}, arm.browser_dns().doh_server())
        self._session = self._reused


def study_switches(settings: ChromiumDns, client: ClientSide, page_http3: bool, source: str) -> list[str]:
    """Every visit's switches before the arm's: the quiet ones, the study's, and the page's HTTP/3: with
    ``page_http3``, where the browser trusts the place's CA, that CA allowed over QUIC for the hosts the place says
    it signs there (nothing forced); without, no QUIC at all (the reference study's HTTP/2 over TCP, as Firefox's
    base profile has it). ``source``: the settings' file, for the error of a profile that forces QUIC."""
    switches = quiet_switches(settings, source)
    if not page_http3:
        if any(s.startswith(f"--{SWITCH}") for s in switches):
            raise HarnessError(f"{source}: {SWITCH} forces QUIC, but the study's page_http3 is false")
        return [*switches, "--disable-quic"]
    hosts = client.quic_ca_hosts if client.browser_trusts_ca else ()
    return with_quic_ca_hosts(switches, hosts)


def quiet_switches(settings: ChromiumDns, source: str = "the study's Chromium settings") -> list[str]:
    """The quiet switches and the study's, with `QUIET_FEATURES_OFF` in the one --disable-features (Chromium
    keeps the last of a repeated switch); a study that turns one of them on is refused, naming ``source``."""
    switches = QUIET + settings.switches()
    enabled = {name for s in switches if s.startswith("--enable-features=") for name in s.split("=", 1)[1].split(",")}
    if clash := sorted(enabled & set(QUIET_FEATURES_OFF)):
        raise HarnessError(f"{source}: feature {clash[0]} must stay off (a renderer made with every new window)")
    off = [s.split("=", 1)[1] for s in switches if s.startswith(DISABLE_FEATURES)]
    merged = DISABLE_FEATURES + ",".join([*off, *QUIET_FEATURES_OFF])
    return [s for s in switches if not s.startswith(DISABLE_FEATURES)] + [merged]


def _require_sandbox(argv: list[str], namespace: str | None) -> None:
    """Chromium's namespace sandbox needs the browser account to create user namespaces: a one-line error
    saying so if it cannot (dnsstudy never falls back to --no-sandbox)."""
    if namespace:
        argv = netns.command(namespace, argv)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise HarnessError(
            f"Chromium's sandbox cannot start: the browser account cannot create a user namespace ({said}); "
            "allow unprivileged user namespaces (kernel.unprivileged_userns_clone, the container's seccomp "
            "profile): dnsstudy never runs Chromium with --no-sandbox"
        )


def ensure_nssdb(directory: Path, ca_path: Path | None) -> Path:
    """An NSS database trusting ``ca_path`` (or nothing but Chromium's own roots), made once under ``directory``
    and owned by root: every visit copies it to its HOME."""
    ca_pem = ca_path.read_bytes() if ca_path else b"no-ca"
    target = directory / f"chromium-nssdb-{hashlib.sha256(ca_pem).hexdigest()[:16]}"
    if (target / "cert9.db").exists():
        return target
    require_program("certutil", "libnss3-tools")
    work = Path(tempfile.mkdtemp(prefix=".nssdb-", dir=directory))
    try:
        _certutil(["-N", "-d", f"sql:{work}", "--empty-password"], "create the NSS database")
        if ca_path:
            _certutil(["-A", "-d", f"sql:{work}", "-n", "dnsstudy lab CA", "-t", "C,,", "-i", str(ca_path)], "trust")
        work.chmod(0o755)
        for path in work.iterdir():
            path.chmod(0o644)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _certutil(args: list[str], what: str) -> None:
    done = subprocess.run(["certutil", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"cannot {what} for Chromium: certutil said: {done.stderr.strip() or done.stdout.strip()}")
