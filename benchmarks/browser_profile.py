"""Where a visit's browser start goes, from Firefox's own profiler: milestones, CPU per process, and the
parent process's main-thread CPU by the chrome module that started the work.

Each session is a visit's browser (the browser account, a fresh copy of the warmed template, geckodriver,
Firefox headless) started with the Gecko profiler on from process start (MOZ_PROFILER_STARTUP); once the
WebDriver session is ready, the profile is dumped from the parent process and read here. CPU comes from
the samples' per-thread CPU deltas, so it means the same on a loaded machine as on an idle one (wall
times do not). The profiler itself costs CPU: compare sessions of this benchmark with each other, not
with visits.

    .venv/bin/python -m benchmarks.browser_profile --sessions 3 [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.browser.account import BrowserAccount
from harness.browser.prefs import DNS_CURRENT, load_prefs
from harness.browser.session import FirefoxSession
from harness.browser.template import ensure_template, firefox_version
from harness.paths import RUN_ROOT

PROFILER = {
    "MOZ_PROFILER_STARTUP": "1",
    "MOZ_PROFILER_STARTUP_INTERVAL": "1",  # ms
    "MOZ_PROFILER_STARTUP_ENTRIES": "50000000",
    "MOZ_PROFILER_STARTUP_FEATURES": "js,stackwalk,cpu,markersallthreads",
    "MOZ_PROFILER_STARTUP_FILTERS": "GeckoMain,Renderer,Compositor,DOM Worker,Socket Thread",
}
# Firefox's own startup timestamps (ms since the epoch), then the moment the session was ready.
MILESTONES = """
const info = Services.startup.getStartupInfo();
const out = {};
for (const k of ["process", "main", "createTopLevelWindow", "firstPaint2", "sessionRestored"]) {
  if (info[k]) out[k] = info[k].getTime();
}
out.ready = Date.now();
return out;
"""
DUMP = """
const [path, done] = arguments;
Services.profiler.dumpProfileToFileAsync(path).then(() => done(null), e => done(String(e)));
"""
CHROME_MODULE = re.compile(r"\(((?:resource|chrome|moz-src)://[^:)]+)")


def threads(profile: dict) -> Iterator[tuple[dict, dict]]:
    """(process profile, thread) for every thread of the parent and its child processes."""
    for thread in profile["threads"]:
        yield profile, thread
    for child in profile.get("processes", []):
        yield from threads(child)


def cpu_ms(sample: list, schema: dict) -> float:
    """A sample's CPU delta in ms (the profile counts ns; a sample without one counts nothing)."""
    at = schema.get("threadCPUDelta")
    return (sample[at] or 0) / 1e6 if at is not None and at < len(sample) else 0.0


def process_cpu(profile: dict) -> dict[str, float]:
    """CPU ms per process kind (parent, tab, socket, rdd, ...), all sampled threads."""
    out: dict[str, float] = defaultdict(float)
    for _, thread in threads(profile):
        schema = thread["samples"]["schema"]
        out[thread.get("processType") or "parent"] += sum(cpu_ms(s, schema) for s in thread["samples"]["data"])
    out["parent"] += out.pop("default", 0.0)
    return out


def modules(thread: dict) -> dict[str, float]:
    """Main-thread CPU ms by the outermost chrome module on the stack: the code that started the work."""
    strings, frames, stacks = thread["stringTable"], thread["frameTable"], thread["stackTable"]
    location, frame_of, prefix = frames["schema"]["location"], stacks["schema"]["frame"], stacks["schema"]["prefix"]
    schema = thread["samples"]["schema"]
    out: dict[str, float] = defaultdict(float)
    for sample in thread["samples"]["data"]:
        stack, outer = sample[schema["stack"]], None
        while stack is not None:
            match = CHROME_MODULE.search(strings[frames["data"][stacks["data"][stack][frame_of]][location]])
            outer = match.group(1) if match else outer
            stack = stacks["data"][stack][prefix]
        out[outer or "(native: layout, style, paint, IPC, loading)"] += cpu_ms(sample, schema)
    return out


def one_session(account: BrowserAccount, template: Path, root: Path, keep: Path | None) -> dict:
    """Start a profiled browser as a visit does; its milestones (ms from process start) and CPU breakdown."""
    work = Path(tempfile.mkdtemp(prefix="profile-", dir=root))
    try:
        profile = work / "profile"
        shutil.copytree(template, profile, symlinks=True)
        account.give(work)
        session = FirefoxSession(account, template, None, root, timeout=60, environment=PROFILER)
        with session.driver(profile, work) as driver:
            driver.command_executor.add_command(  # type: ignore[union-attr]  # a RemoteConnection
                "SET_CONTEXT", "POST", "/session/$sessionId/moz/context"
            )
            driver.execute("SET_CONTEXT", {"context": "chrome"})
            stamps = driver.execute_script(MILESTONES)
            driver.set_script_timeout(60)
            failure = driver.execute_async_script(DUMP, str(work / "gecko.json"))
            if failure:
                raise RuntimeError(f"the profiler did not dump: {failure}")
        # The file is the browser account's, in its directory: read it without following a link.
        with os.fdopen(os.open(work / "gecko.json", os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            raw = f.read()
        if keep:
            (keep / f"{work.name}.json").write_bytes(raw)
        data = json.loads(raw)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    start = stamps.pop("process")
    main = next(t for _, t in threads(data) if t["name"] == "GeckoMain" and t.get("processType") == "default")
    return {
        "milestones": {k: v - start for k, v in stamps.items()},
        "cpu": process_cpu(data),
        "modules": modules(main),
    }


def median_of(rows: list[dict], key: str) -> dict[str, float]:
    names = {name for row in rows for name in row[key]}
    return {name: statistics.median(row[key].get(name, 0.0) for row in rows) for name in names}


def report(rows: list[dict], top: int) -> None:
    print(f"\nmedians over {len(rows)} profiled sessions")
    print("milestones (ms from process start; ready = the WebDriver session returned):")
    for name, value in sorted(median_of(rows, "milestones").items(), key=lambda kv: kv[1]):
        print(f"  {name:22}{value:8.0f}")
    print("CPU per process (ms):")
    for name, value in sorted(median_of(rows, "cpu").items(), key=lambda kv: -kv[1]):
        print(f"  {name:22}{value:8.0f}")
    by_module = median_of(rows, "modules")
    total = sum(by_module.values())
    print(f"parent main thread, {total:.0f} ms of CPU, by the module that started the work (top {top}):")
    for name, value in sorted(by_module.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {value:7.0f} {100 * value / total:5.1f} %  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--top", type=int, default=20, help="modules to list")
    parser.add_argument("--keep", type=Path, help="copy each Gecko profile here (for profiler.firefox.com)")
    args = parser.parse_args()
    account = BrowserAccount.lookup()
    prefs: dict[str, Any] = {**load_prefs().as_dict(), **load_prefs(DNS_CURRENT).as_dict()}
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    # Under /run/dnsstudy, like a place's: the browser account must reach its work directories.
    with tempfile.TemporaryDirectory(prefix="browser-profile-", dir=RUN_ROOT) as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        template = ensure_template(root, None, prefs, account, None, firefox_version())
        rows = []
        for i in range(args.sessions):
            rows.append(one_session(account, template, root, args.keep))
            print(f"session {i + 1}/{args.sessions}: ready at {rows[-1]['milestones']['ready']:.0f} ms", flush=True)
    report(rows, args.top)


if __name__ == "__main__":
    main()
