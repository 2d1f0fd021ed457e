"""Link emulation accuracy, link-check cost, delayer CPU and profile-switch time, per network profile.

For each profile: apply it, run the link check `--repeat` times (the crawl's settings by default: 200
probes, no least window), and print how long it took and measured beside target; meanwhile sample the
delayers' CPU time during the rate test. Then check links shaped wrong (a profile checked against
another, 3G with its rate 10 % off) to show the verdict, time switches between profiles, and, with
`--tcp-seconds`, measure TCP goodput per direction with iperf3 (information: it depends on the
congestion control and the loss, which is why the check measures the bottleneck with UDP instead).

    .venv/bin/python -m benchmarks.shaping [--probes 200] [--seconds 0] [--repeat 3] [--switches 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

from benchmarks.benchlab import add_lab_arguments, fresh_lab
from harness.place import ProbePeer
from harness.shaping.link_profile import LinkProfile

IPERF_PORT = 5201
WRONG = [("4g", "3g"), ("3g", "4g"), ("wired", "3g"), ("3g@0.9", "3g"), ("3g@1.1", "3g")]  # (shaped, checked as)


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def link(name: str):
    """A shipped profile, or NAME@FACTOR: the profile with both rates scaled by FACTOR."""
    from harness.shaping.link_profile import load_link_profile

    base, _, factor = name.partition("@")
    profile = load_link_profile(base)
    if not factor:
        return profile
    ways = {
        way: getattr(profile, way).model_copy(update={"rate_mbit": getattr(profile, way).rate_mbit * float(factor)})
        for way in ("uplink", "downlink")
    }
    return profile.model_copy(update={"name": name, **ways})


def iperf(peer, direction: str, seconds: float) -> float | None:
    """TCP goodput in Mbit/s of one iperf3 flow (first second omitted: slow start); uplink = client sends."""
    from harness import netns

    server = subprocess.Popen(
        netns.command(peer.server_namespace, ["iperf3", "-s", "-B", peer.address, "-p", str(IPERF_PORT)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if netns.wait_tcp(peer.server_namespace, [(peer.address, IPERF_PORT)], timeout=5):
            return None
        argv = ["iperf3", "-c", peer.address, "-p", str(IPERF_PORT), "-t", f"{seconds:g}", "-O", "1", "-J"]
        if direction == "downlink":
            argv.append("-R")
        done = subprocess.run(
            netns.command(peer.client_namespace, argv), capture_output=True, text=True, timeout=seconds + 30
        )
        try:
            return round(json.loads(done.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6, 3)
        except (ValueError, KeyError):
            return None
    finally:
        server.kill()
        server.wait()


def timed_checks(lab, shaper, name: str, args: argparse.Namespace) -> tuple[list, list[float], float]:
    """Apply ``name``, run the check ``args.repeat`` times; (checks, durations, delayer CPU % in the rate tests)."""
    from harness.shaping import check as checkmod

    shaped = link(name)
    shaper.apply(shaped)
    pids = [d.pid for d in shaper.daemons()]
    busy: list[float] = []
    original = checkmod.measure_rates

    def measured(peer: ProbePeer, profile: LinkProfile, least_window_s: float = 0.0) -> dict[str, dict]:
        before, start = {p: cpu_seconds(p) for p in pids}, time.monotonic()
        result = original(peer, profile, least_window_s)
        busy.append(sum(cpu_seconds(p) - before[p] for p in pids) / (time.monotonic() - start) * 100)
        return result

    checkmod.measure_rates = measured
    checks, took = [], []
    try:
        for _ in range(args.repeat):
            start = time.monotonic()
            backend = (shaper.state() or {}).get("backend")
            checks.append(checkmod.check_link(lab, shaped, backend, probes=args.probes, seconds=args.seconds))
            took.append(time.monotonic() - start)
    finally:
        checkmod.measure_rates = original
    return checks, took, max(busy, default=0.0)


def rate_cell(checks: list, way: str) -> str:
    """Measured rate (min-max over the repeats) and target, in Mbit/s."""
    values = [c.to_dict()[f"{way}_rate_mbit"] for c in checks]
    target = checks[0].targets[f"{way}_rate_mbit"]
    if target is None:
        return "- (unlimited)"
    shown = [v for v in values if v is not None]
    span = f"{min(shown):.4g}-{max(shown):.4g}" if shown else "none"
    return f"{span} ({target:g})"


def print_table(rows: list, args: argparse.Namespace) -> None:
    backend = rows[0][1][0].backend
    print(f"\n{args.probes} probes, least rate window {args.seconds:g} s, {args.repeat} checks each, backend {backend}")
    print(
        f"{'profile':24}{'check s (median, max)':>23}{'RTT ms (target)':>18}{'up Mbit/s (target)':>24}"
        f"{'down Mbit/s (target)':>24}{'worst dev / late ms':>22}{'delayer CPU %':>15}  verdicts off"
    )
    for name, checks, took, cpu in rows:
        c = checks[0]
        worst = max((t["deviation_ms"] or 0 for k in checks for t in k.rate_tests.values()), default=0)
        late = max((t["late_ms"] for k in checks for t in k.rate_tests.values()), default=0)
        off = sorted({v for k in checks for v, ok in k.verdicts.items() if ok is False})
        print(
            f"{name:24}{statistics.median(took):>15.2f}, {max(took):5.2f}"
            f"{c.rtt_mean_ms or 0:>10.2f} ({c.targets['rtt_mean_ms']:>5.1f})"
            f"{rate_cell(checks, 'uplink'):>24}{rate_cell(checks, 'downlink'):>24}"
            f"{worst:>13.2f} / {late:5.1f}{cpu:>15.1f}  {', '.join(off) or '-'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=0.0, help="least rate window per direction")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--switches", type=int, default=10)
    parser.add_argument("--tcp-seconds", type=float, default=0.0, help="iperf3 TCP goodput for this long (0: none)")
    parser.add_argument("--profiles", default="wired,4g,4g-lossy,3g,4g-symmetric,4g-lossy-symmetric,3g-symmetric")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.shaping.check import check_link
    from harness.shaping.shaper import Shaper

    lab = fresh_lab(args)
    shaper = Shaper(lab)
    rows, wrong, tcp, switch = [], [], {}, []
    try:
        for name in args.profiles.split(","):
            rows.append((name, *timed_checks(lab, shaper, name, args)))
            if args.tcp_seconds:
                tcp[name] = [iperf(lab.probe_peer(), way, args.tcp_seconds) for way in ("uplink", "downlink")]
            print(f"{name}: done", flush=True)
        for shaped, checked in WRONG:
            shaper.apply(link(shaped))
            backend = (shaper.state() or {}).get("backend")
            wrong.append((shaped, checked, check_link(lab, link(checked), backend, probes=args.probes)))
        links = [link(n) for n in ("4g", "3g")]
        for i in range(args.switches):
            start = time.monotonic()
            shaper.apply(links[i % 2])
            switch.append(time.monotonic() - start)
        shaper.clear()
    finally:
        lab.down()

    print_table(rows, args)
    print("\nlinks shaped wrong (shaped -> checked as): measured (target) per direction, verdict")
    for shaped, checked, c in wrong:
        cells = [
            f"{way} {c.to_dict()[f'{way}_rate_mbit']} ({c.targets[f'{way}_rate_mbit']}) "
            f"{'on' if c.verdicts[f'{way}_rate_within_5pct'] else 'OFF'}"
            for way in ("uplink", "downlink")
        ]
        print(f"  {shaped:8} -> {checked:4}  {'; '.join(cells)}; passed: {c.passed}")
    if tcp:
        print(f"\nTCP goodput, one iperf3 flow, {args.tcp_seconds:g} s after 1 s omitted (up, down Mbit/s): {tcp}")
    print(
        f"\nprofile switch 4g <-> 3g: median {statistics.median(switch):.3f} s, max {max(switch):.3f} s "
        f"over {len(switch)} switches (target <= 1 s)"
    )


if __name__ == "__main__":
    main()
