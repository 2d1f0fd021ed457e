"""One Chromium for many visits (`browser_session = "reused"`): what a new user context isolates, what Chromium's
clearing adds, and why a change of the arm's DNS settings replaces the browser.

`ReusedSession` (harness/browser/reused.py) runs the visits, each in a new WebDriver BiDi user context, removed
after it. In Chromium a user context is a browser context of its own (chromium-bidi's `createUserContext` is
CDP's `Target.createBrowserContext`: an off-the-record profile made for DevTools), and so a storage partition
and a network context of its own, in memory, gone with the context: cookies, storage, the HTTP cache, the
socket pools and the TLS session cache (the context's `HttpNetworkSession`), HSTS and alt-svc (its
`TransportSecurityState`, `HttpServerProperties`), and the host cache: net/dns/resolve_context.h, "Per-
URLRequestContext data used by HostResolver", owns the `HostCache`, the DoH servers' availability, and the
URLRequestContext DoH's requests go through, so the DoH connection is the context's too (a visit's DoH is
cold unless warmed in its own context, as a fresh browser's is). Renderers are never shared between browser
contexts, so Blink's memory cache goes with its processes.

What a new context does not reach, the network service's own: the `HostResolverManager` (the DNS
configuration and the secure DNS mode, fixed at launch, below; plain DNS holds no connection: one UDP socket
per query), the network quality estimator (what the link was like, not what a site left), and NSS's
in-memory certificates. Chromium's clearing (`_clear_for_visit`) therefore only removes a user context a visit
left (its end failed): everything a site leaves is in its context.

**The DNS settings are fixed at launch.** Secure DNS is Local State `dns_over_https.*`, which the browser
process hands to the whole network service (`ConfigureStubHostResolver`), and the DoH server's address a
command-line host-resolver rule: nothing a WebDriver or DevTools client may send changes either. The built-in
resolver's name servers are fixed too: Chromium reads resolv.conf at its start and again only when its
watcher of /etc sees the file change, which it never does here (`ip netns exec` bind-mounts the namespace's
file, changed in place: the change is an event of its real directory, /etc/netns/<ns>/). Seen in the lab: a
DoT visit after a Do53 one sent its 62 queries straight to the resolver, not to the stub. So the browser is
replaced when a visit's arm needs other launch settings (`launch_settings`: switches, Local State and the
name servers; DoT, DoQ and DoH3 through their stub on loopback share one, Do53 has one, DoH one per resolver),
recorded as the restart's reason, rather than one browser kept per launch settings: two browsers idle in one
client namespace would share a visit's counters (Chromium asks its own services' names by itself, and an idle
browser's lookup during another arm's visit would fail that visit's proof), and a browser's kill is every
process of the browser account in the namespace. The cost: in a plan that shuffles each site's
configurations, a restart at each change between Do53, the stub arms and DoH.

The net log (harness/browser/chromium_netlog.py) runs for the browser's whole life; each visit reads the part
written since it began. The warm-up page's CA goes into the NSS database the session copies, before the
browser starts: the running browser is given no certificate.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from selenium import webdriver

from harness.browser.chromium_netlog import CHROMIUM_OWN_NAMES, load_netlog, netlog_dns, read_netlog
from harness.browser.chromium_netlog_har import FLUSH_URL, page_requests
from harness.browser.chromium_session import ChromiumSession
from harness.browser.reused import READY_LIMIT_S, ReusedSession
from harness.browser.warmup import WarmupServer

#: The user context every browser starts with: its first tab, never a visit's.
DEFAULT_USER_CONTEXT = "default"

#: A new user context's window kept a renderer busy for about 0.45 s after `browsingContext.create` returned
#: (0.5-0.6 s of CPU: the omnibox popups' WebUI, now off, `QUIET_FEATURES_OFF`), and a page navigated at once
#: loaded in 1.5x the time (docs/visit.md, "A new tab's renderer"). Before each navigation the renderers must
#: be idle: at most `IDLE_CPU_S` of CPU in all in each of `IDLE_STEPS` steps of `IDLE_STEP_S` (busy: a step's
#: length or more). Read in nanoseconds (/proc/PID/schedstat): clock ticks (10 ms) needed steps of 20 ms.
IDLE_STEP_S = 0.01
IDLE_STEPS = 2
IDLE_CPU_S = 0.0025
#: How often the net log is read for the flush's request (`_flush`): it is written some 10 ms after the fetch;
#: past the wait the part written is read as it is, and the record says so (`netlog_flushed`).
FLUSH_POLL_S = 0.002
FLUSH_WAIT_S = 1.0


def launch_settings(switches: list[str], local_state: dict, nameservers: list[str]) -> str:
    """What a Chromium is started with that a running one cannot change: its switches, Local State and the
    name servers of its resolv.conf."""
    return json.dumps({"switches": switches, "local_state": local_state, "nameservers": nameservers}, sort_keys=True)


def describe_launch(launch: str) -> str:
    """A browser's DNS launch settings in a few words, for a restart's reason: "secure DNS <template>", or
    "built-in resolver on <name servers>"."""
    settings = json.loads(launch)
    doh = settings["local_state"].get("dns_over_https", {})
    if doh.get("mode") != "off":
        return f"secure DNS {doh.get('templates')}"
    return f"built-in resolver on {','.join(settings['nameservers']) or 'no name server'}"


class ReusedChromiumSession(ReusedSession, ChromiumSession):
    """A `ChromiumSession` that serves visit after visit (`ReusedSession`); the visit's settings are the launch
    settings it needs, which must be the browser's own (`Chromium` replaces a browser started with others)."""

    #: chromedriver needs no current window between visits: each visit switches to its own tab, and the first
    #: tab is reached through BiDi (`_flush`).
    home_after_visit = False
    #: The visit's tab and user context begin to close once the collection has fixed its part of the net log,
    #: while the part is parsed (Chromium's teardown on one core, the parse on the other).
    close_tab_at_collection = True
    #: The next visit's tab opened beside that closing (`ReusedSession.open_next_at_collection`): its new renderer
    #: starts while the harness parses the visit's part, reads its counters and stores it; an about:blank tab in a
    #: new user context asks no name, and its events fall outside the visit's part (after the flush).
    open_next_at_collection = True

    def __init__(self, *args: Any, nameservers: list[str], **kwargs: Any):
        """`ChromiumSession`'s arguments, and the name servers of the client's resolv.conf at its start."""
        super().__init__(*args, **kwargs)
        self.launch = launch_settings(self.switches, self.local_state, nameservers)
        self._netlog_from = 0  # the net log's size when the current visit began
        self._netlog_config: dict = {}  # the resolver's configuration as the net log last said it
        self._untrusted = ""  # what certutil said when it could not add the warm-up CA

    def _prepare(self, work: Path) -> Path:
        """The user-data directory and HOME, and the warm-up server's CA trusted in the NSS database there."""
        user_data = super()._prepare(work)
        if self.warm_start:
            server = WarmupServer(self.namespace, self.account, work)
            ca = server.dir / "ca.der"
            ca.write_bytes(server.ca_der)
            nssdb = f"sql:{work / 'home' / '.pki' / 'nssdb'}"
            argv = ["certutil", "-A", "-d", nssdb, "-n", "dnsstudy warm-up", "-t", "C,,", "-i", str(ca)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            # Not trusted: no server here, and the warm-up fails, as the start's failure (`_trust_...`).
            self._warmup_server = server if done.returncode == 0 else None
            self._untrusted = done.stderr.strip() or done.stdout.strip()
            self.account.give(work)
        return user_data

    def _trust_warmup_certificate(self, server: WarmupServer) -> None:
        """Nothing at run time: the CA was put in the NSS database before the browser started (`_prepare`)."""
        if server is not self._warmup_server:
            raise RuntimeError(f"the warm-up CA is not in Chromium's NSS database: certutil said {self._untrusted!r}")

    def _clear_for_visit(self, settings: dict) -> None:
        """Refuse other launch settings; remove any user context a visit left (its end failed), all but the one
        opened for this visit (`open_next_tab`); mark where the visit's part of the net log begins."""
        assert self._events is not None  # alive
        if settings.get("launch") != self.launch:
            raise RuntimeError("the visit's DNS launch settings are not the browser's: it must be replaced")
        for context in self._events.command("browser.getUserContexts", {})["userContexts"]:
            if context["userContext"] not in (DEFAULT_USER_CONTEXT, self._user_context):
                self._events.command("browser.removeUserContext", {"userContext": context["userContext"]})
        try:
            self._netlog_from = self._netlog.stat().st_size
        except OSError:
            self._netlog_from = 0

    def _await_tab_ready(self) -> dict:
        """Wait, at most `READY_LIMIT_S`, until the browser's renderers are idle (the new tab's starting);
        how many there were, whether they went idle, and the seconds waited."""
        start, quiet = time.monotonic(), 0
        cpu = renderer_cpu_s(self._renderers())
        while quiet < IDLE_STEPS and time.monotonic() - start < READY_LIMIT_S:
            time.sleep(IDLE_STEP_S)
            now = renderer_cpu_s(self._renderers())
            busy = sum(max(0.0, n - cpu.get(pid, 0.0)) for pid, n in now.items())
            quiet, cpu = (quiet + 1 if busy <= IDLE_CPU_S else 0), now
        return {
            "renderers": len(cpu),
            "renderers_idle": quiet >= IDLE_STEPS,
            "waited_s": round(time.monotonic() - start, 3),
        }

    def _renderers(self) -> list[int]:
        """The browser's renderer processes: its descendants (sandboxed, each in a network namespace of its own)
        that Chromium started as renderers."""
        assert self._browser_pid is not None  # alive
        return [pid for pid in descendants(self._browser_pid) if b"--type=renderer" in _cmdline(pid)]

    def _read_netlog(self, driver: webdriver.Remote) -> None:
        """The visit's part of the net log, the browser left running: fixed once all of it is written (`_flush`),
        then parsed while the visit's tab and user context close (`close_tab_at_collection`)."""
        if not self._netlog_config:  # the resolver's configuration is logged at the start, before any visit's part
            start = read_netlog(self._netlog)
            self._netlog_config = start.config if start is not None else {}
        sandbox = self._sandbox()  # while the visit's renderer runs
        until = self._flush(FLUSH_WAIT_S)
        if self.close_tab_at_collection:
            self._close_visit_early()
        # until None (not flushed within the wait): all written so far; flushing again would double the wait.
        data = load_netlog(self._netlog, since=self._netlog_from, until=until)
        found = netlog_dns(data, config=self._netlog_config, own_names=CHROMIUM_OWN_NAMES)
        if found is not None:
            self._netlog_config = found.config
        self._report_netlog(found, sandbox)
        if self._source == "netlog":
            self._report_requests(page_requests(data))

    def _visit_part(self) -> dict | None:
        """The visit's part of the net log so far, flushed first (`_flush`): for a test that reads it mid-visit."""
        return load_netlog(self._netlog, since=self._netlog_from, until=self._flush(FLUSH_WAIT_S))

    def _flush(self, max_wait: float) -> int | None:
        """Have the running browser write out its net log; the log's size once it did, None if it did not within
        ``max_wait`` (the record's `netlog_flushed` says which).

        A running Chromium writes its log in batches of 15 events, so the page's last events may wait in memory
        for later ones. A fetch from the first tab to a closed port on loopback (`FLUSH_URL`, left out of the
        page's requests) gives them; its start written, everything before it is too. A fetch, not a navigation of
        the tab: that committed an error page each visit, 4-5x the time to the write (probe, 8 visits each)."""
        if self._source != "netlog" or self._events is None or self._home is None or not self.alive:
            return None
        t = time.monotonic()
        try:
            expression = f"fetch({json.dumps(FLUSH_URL)}, {{mode: 'no-cors'}}).catch(() => null), null"
            self._events.command(
                "script.evaluate", {"expression": expression, "target": {"context": self._home}, "awaitPromise": False}
            )
        except Exception:  # a browser that cannot run it: its log's written part is read all the same
            pass
        marker, read, size = FLUSH_URL.encode(), self._netlog_from, None
        while size is None and time.monotonic() - t < max_wait:
            tail = _tail(self._netlog, read)
            if marker in tail:
                size = read + len(tail)
            else:  # the marker may begin in the bytes read last
                read = max(read, read + len(tail) - len(marker))
                time.sleep(FLUSH_POLL_S)
        self.report.ready = {**(self.report.ready or {}), "netlog_flushed": size is not None}
        return size


def _tail(path: Path, since: int) -> bytes:
    """The file's bytes from ``since`` (none if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            return f.read()
    except OSError:
        return b""


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (children, theirs, ...), as /proc shows their parents now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def renderer_cpu_s(pids: list[int]) -> dict[int, float]:
    """CPU time in seconds of each process still running: its threads' now, as the scheduler counts it (in
    nanoseconds; /proc/PID/schedstat is the first thread's only). A thread that ended takes its time along; a
    renderer's threads (main, compositor, pools) live as long as it does."""
    cpu = {}
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        cpu[pid] = sum(_thread_cpu_ns(pid, thread) for thread in threads) / 1e9
    return cpu


def _thread_cpu_ns(pid: int, thread: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/task/{thread}/schedstat").read_text().split()[0])
    except (OSError, IndexError, ValueError):  # the thread ended
        return 0


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
