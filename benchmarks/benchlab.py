"""What every lab benchmark shares: its own lab (prefix and subnet apart from the tests'), started fresh."""

from __future__ import annotations

import argparse


def add_lab_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prefix", default="dsbench", help="lab prefix (apart from the tests' dstest)")
    parser.add_argument("--subnet", default="198.18.16.0/23")


def fresh_lab(args: argparse.Namespace):
    """The benchmark's lab, brought down (whatever a crash left) and up again."""
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    lab = Lab(load_lab_config().with_overrides(prefix=args.prefix, subnet=args.subnet))
    lab.down()
    lab.up(wait=60)  # its nginx took 23 s to listen on a 2-core machine shared with other jobs (load 10)
    return lab
