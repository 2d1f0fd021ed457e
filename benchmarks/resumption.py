"""The first DoT answer on a new connection, with and without TLS session tickets.

Brings one lab up in three variants, one after the other, for --rounds rounds:

  off      tls_resumption = false: unbound sends no tickets (the default lab)
  stalled  tickets without the nodelay shim: what unbound 1.17 does with tickets
  on       tls_resumption = true: tickets, and the shim that sets TCP_NODELAY on DoT

and in each times --connections new DoT connections to `near` on the unshaped link
(in `on`, as many resumed ones too). The first answer is the query's duration less
its connection's TCP and TLS setup: from the end of the client's handshake to the
answer, where the Nagle stall shows.

    .venv/bin/python -m benchmarks.resumption [--connections 50] [--rounds 3] [--prefix P --subnet S]
"""

from __future__ import annotations

import argparse
import statistics
from typing import TYPE_CHECKING
from unittest import mock

from benchmarks.benchlab import add_lab_arguments

if TYPE_CHECKING:
    from harness.lab.lab import Lab
    from harness.timer import Timing

VARIANTS = ("off", "stalled", "on")


def variant_lab(args: argparse.Namespace, variant: str) -> Lab:
    """The benchmark's lab with tickets on or off."""
    from harness.lab.config import LabConfig, load_lab_config
    from harness.lab.lab import Lab

    config = load_lab_config().with_overrides(prefix=args.prefix, subnet=args.subnet)
    settings = config.settings.model_copy(update={"tls_resumption": variant != "off"})
    return Lab(LabConfig(settings=settings, source=config.source))


def bring_up(lab: Lab, variant: str) -> None:
    """Bring the lab up fresh; `stalled` leaves unbound without the nodelay shim."""
    import harness.lab.servers as servers_module

    lab.down()
    # A loaded machine may take longer than `lab up`'s 10 s to start nginx on every address.
    if variant == "stalled":
        with mock.patch.object(servers_module, "nodelay_env", lambda: {}):
            lab.up(wait=60)
    else:
        lab.up(wait=60)


def first_answers_ms(timings: list[Timing]) -> list[float]:
    """Per new TLS connection: its query's duration less the connection's TCP and TLS setup, in ms."""
    return [
        (t.duration_us - (t.tcp_setup_us or 0) - t.tls_setup_us) / 1000
        for t in timings
        if t.ok and t.new_connection and t.duration_us is not None and t.tls_setup_us is not None
    ]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.timer import TimerSettings, time_names

    names = ["www.lab.test"] * (args.connections + 1)  # the first warms the library and is not counted
    answers: dict[tuple[str, str], list[float]] = {}
    resumed_counts = {"cold": 0, "resumed": 0}
    for round_ in range(args.rounds):
        for variant in VARIANTS:
            print(f"round {round_ + 1}/{args.rounds}: {variant}", flush=True)
            lab = variant_lab(args, variant)
            try:
                bring_up(lab, variant)
                client, near = lab.client_side(), lab.resolver("near")
                kinds = [("cold", TimerSettings(reuse=False))]
                if variant == "on":
                    kinds.append(("resumed", TimerSettings(reuse=False, resume=True)))
                for kind, settings in kinds:
                    timings = time_names(client, "dot", near, names, settings)[1:]
                    if variant == "on":
                        resumed_counts[kind] += sum(bool(t.resumed) for t in timings)
                    answers.setdefault((variant, kind), []).extend(first_answers_ms(timings))
            finally:
                lab.down()
    print(f"first DoT answer after the handshake, ms; {args.rounds} rounds x {args.connections} new connections")
    print(f"{'variant':8} {'kind':8} {'n':>5} {'median':>8} {'p10':>8} {'p90':>8} {'max':>8}")
    for (variant, kind), values in answers.items():
        print(
            f"{variant:8} {kind:8} {len(values):5} {statistics.median(values):8.3f} "
            f"{quantile(values, 0.1):8.3f} {quantile(values, 0.9):8.3f} {max(values):8.3f}"
        )
    print(f"connections resumed in `on`: cold {resumed_counts['cold']}, resumed {resumed_counts['resumed']}")


if __name__ == "__main__":
    main()
