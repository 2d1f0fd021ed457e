"""Link emulation accuracy, delayer CPU and profile-switch time, per network profile.

For each profile: apply it, run `net check` with many probes, and print
measured beside target; meanwhile sample the delayers' CPU time during the
downlink TCP test. Then time switches between profiles (median of N).

    .venv/bin/python benchmarks/shaping.py [--probes 2000] [--seconds 10] [--switches 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchlab import add_lab_arguments, fresh_lab  # benchmarks run as scripts: their directory is on the path


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--switches", type=int, default=10)
    parser.add_argument("--profiles", default="4g,4g-lossy,3g,4g-symmetric,4g-lossy-symmetric,3g-symmetric")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.shaping import check as checkmod
    from harness.shaping.check import binomial_interval, check_link
    from harness.shaping.profile import load_link_profile
    from harness.shaping.shaper import Shaper

    lab = fresh_lab(args)
    shaper = Shaper(lab)
    rows = []
    try:
        for name in args.profiles.split(","):
            link = load_link_profile(name)
            shaper.apply(link)
            pids = [d.pid for d in shaper.daemons()]
            cpu: dict[str, float] = {}
            original = checkmod.iperf

            def timed_iperf(lab_, direction, seconds, _orig=original, pids=pids, cpu=cpu):
                before = {p: cpu_seconds(p) for p in pids}
                start = time.monotonic()
                result = _orig(lab_, direction, seconds)
                wall = time.monotonic() - start
                cpu[direction] = sum(cpu_seconds(p) - before[p] for p in pids) / wall * 100
                return result

            checkmod.iperf = timed_iperf
            try:
                c = check_link(lab, link, "userspace", probes=args.probes, seconds=args.seconds)
            finally:
                checkmod.iperf = original
            up_ci = binomial_interval(c.uplink_lost, c.probes)
            rows.append((name, c, up_ci, cpu))
            print(f"{name}: done", flush=True)

        links = [load_link_profile(n) for n in ("4g", "3g")]
        switch = []
        for i in range(args.switches):
            start = time.monotonic()
            shaper.apply(links[i % 2])
            switch.append(time.monotonic() - start)
        shaper.clear()
    finally:
        lab.down()

    print(f"\n{args.probes} UDP probes, {args.seconds:g} s iperf3 per direction, backend userspace")
    print(
        f"{'profile':20}{'RTT mean (target)':>22}{'SD':>7}{'up loss % (target, 95% CI)':>34}{'down loss %':>12}"
        f"{'up Mbit/s (target)':>22}{'down Mbit/s (target)':>24}{'delayer CPU % (down test)':>27}"
    )
    for name, c, ci, cpu in rows:
        t = c.targets
        print(
            f"{name:20}{c.rtt_mean_ms:>12.2f} ({t['rtt_mean_ms']:>6.1f}){c.rtt_sd_ms:>7.2f}"
            f"{c.uplink_loss_percent:>12.2f} ({t['uplink_loss_percent']:g}, {ci[0]:.2f}-{ci[1]:.2f})"
            f"{c.downlink_loss_percent:>12.2f}"
            f"{c.uplink_mbit or 0:>12.2f} ({t['uplink_mbit'] or 0:>6.2f})"
            f"{c.downlink_mbit or 0:>14.2f} ({t['downlink_mbit'] or 0:>6.2f})"
            f"{cpu.get('downlink', 0):>27.1f}"
        )
        print(f"{'':20}verdicts: {c.verdicts}")
    print(
        f"\nprofile switch 4g <-> 3g: median {statistics.median(switch):.3f} s, max {max(switch):.3f} s "
        f"over {len(switch)} switches (target <= 1 s)"
    )


if __name__ == "__main__":
    main()
