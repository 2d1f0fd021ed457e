"""The `dnsstudy` command line: one module per command group.

A command parses its options, calls one function of the harness (or of the
analysis), and prints; the logic lives in those functions.
"""

from __future__ import annotations

import click

from harness import __version__
from harness.cli import analysis, bench, crawl, distributed, internet, lab, net, replay, status, timer, visit


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dnsstudy")
def main() -> None:
    """Measure how the DNS transport a browser uses changes page loads."""


for command in (
    lab.lab,
    lab.web,
    visit.visit,
    internet.internet,
    timer.timer,
    bench.bench,
    net.net,
    crawl.study,
    crawl.crawl,
    crawl.demo,
    status.status,
    distributed.broker,
    distributed.worker,
    distributed.coordinate,
    analysis.analyze,
    analysis.claims,
    analysis.export,
    replay.archive,
    replay.record,
):
    main.add_command(command)
