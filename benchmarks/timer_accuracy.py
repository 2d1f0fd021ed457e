"""How far the resolution timer's durations are from the wire.

For Do53, and for warm DoT and DoH queries, time queries with the timer while
tcpdump captures the client namespace, then compare each duration with the
packets' own: the query leaving to the answer arriving. Prints the median and
95th percentile of the overhead per protocol (target: median <= 0.2 ms), then
the cold-connection costs under a shaped link, in RTTs.

    .venv/bin/python -m benchmarks.timer_accuracy [--queries 500] [--network 4g-symmetric]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks.benchlab import add_lab_arguments, fresh_lab


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--network", default="4g-symmetric")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.capture import capture, do53_wire_us, tcp_exchanges
    from harness.shaping.link_profile import load_link_profile
    from harness.shaping.probes import probe_rtt
    from harness.shaping.shaper import Shaper
    from harness.timer import time_names, timer_protocols

    lab = fresh_lab(args)
    client, near, ns = lab.client_side(), lab.resolver("near"), lab.config.namespaces["client"]
    names = [f"q{i}.lab.test" for i in range(args.queries)]
    try:
        print(f"overhead = timer duration - wire duration, {args.queries} queries each, unshaped link")
        print(f"{'protocol':9} {'median ms':>10} {'p95 ms':>8} {'matched':>8}")
        with tempfile.TemporaryDirectory() as tmp:
            pcap = Path(tmp) / "do53.pcap"
            with capture(ns, pcap, ["udp", "port", "53"]):
                timings = time_names(client, "do53", near, names)
            wire = do53_wire_us(pcap)
            over = [(t.duration_us - wire[t.name]) / 1000 for t in timings if t.name in wire and t.duration_us]
            print(f"{'do53':9} {statistics.median(over):10.3f} {quantile(over, 0.95):8.3f} {len(over):8}")
            for protocol, port in (("dot", 853), ("doh", 443)):
                pcap = Path(tmp) / f"{protocol}.pcap"
                with capture(ns, pcap, ["tcp", "port", str(port), "and", "host", near.address]):
                    timings = time_names(client, protocol, near, names)
                warm = [t for t in timings if t.ok and not t.new_connection]
                exchanges = tcp_exchanges(pcap, port)[-len(warm) :]
                over = [(t.duration_us - e.us) / 1000 for t, e in zip(warm, exchanges, strict=False) if t.duration_us]
                print(f"{protocol:9} {statistics.median(over):10.3f} {quantile(over, 0.95):8.3f} {len(over):8}")

        shaper = Shaper(lab)
        shaper.apply(load_link_profile(args.network))
        rtts, _, _ = probe_rtt(lab, 200, 0.01, 1.0)
        rtt = statistics.median(rtts)
        print(f"\n{args.network}: RTT {rtt:.2f} ms (median of {len(rtts)} UDP probes); 20 samples each")
        print(f"{'protocol':9} {'cold ms':>9} {'cold RTTs':>10} {'warm ms':>9} {'warm RTTs':>10}")
        for protocol in timer_protocols():
            colds: list[float] = []
            warms: list[float] = []
            for _ in range(20):
                pair = time_names(client, protocol, near, ["www.lab.test", "google.com"])
                colds.append(pair[0].ms or float("nan"))  # a failed query shows as nan, not as fast
                warms.append(pair[1].ms or float("nan"))
            cold_ms, warm_ms = statistics.median(colds), statistics.median(warms)
            print(f"{protocol:9} {cold_ms:9.2f} {cold_ms / rtt:10.2f} {warm_ms:9.2f} {warm_ms / rtt:10.2f}")
    finally:
        lab.down()


if __name__ == "__main__":
    main()
