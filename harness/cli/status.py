"""`dnsstudy status STORE`: a running or finished crawl, read from its store without disturbing it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import console, one_line_errors

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.status import StudyStatus
    from harness.store.records import BlockOverview, FailedVisit, LinkCheck, TimerRun


@click.command("status")
@click.argument("store_path", metavar="STORE", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--failures", default=5, show_default=True, type=click.IntRange(0), help="Failures of each kind shown.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@one_line_errors
def status(store_path: Path, failures: int, as_json: bool) -> None:
    """Progress, ETA, success per configuration, blocks, last failures and the crawler's state of STORE.

    Read-only: safe while a crawl writes the store. Exit status 0 when every study is finished, 3 while a
    crawl runs, 1 when a study stopped unfinished (no live crawler), 2 if STORE is not a store.
    """
    from harness.status import store_status

    report = store_status(store_path, failures=failures)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    else:
        say(f"store {report.path} ({report.journal_mode} journal)")
        if not report.studies:
            say("no study in this store yet")
        for study in report.studies:
            for line in study_lines(study):
                say(line)
    sys.exit(report.exit_code)


def say(line: str) -> None:
    """One line as it is: no markup, no highlighting, no wrapping (the output may be a log or a pipe)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def study_lines(s: StudyStatus) -> list[str]:
    """The text report of one study."""
    from harness.progress import eta_text

    now = time.time()
    lines = [f"study {s.study_id}: {s.state.upper()}: {s.why}"]
    progress = f"  progress: {s.done}/{s.total} visits ({100 * s.done / max(s.total, 1):.1f} %)"
    if s.rate_per_hour:
        progress += f", {s.rate_per_hour:.0f} visits/h over the last 15 min of visits"
    if s.last_visit_at:
        progress += f", last visit started {_clock(s.last_visit_at)} ({_ago(now - s.last_visit_at)} ago)"
    if s.done < s.total:
        eta = eta_text(now, s.eta)
        progress += f", {eta}" if s.state == "running" else f", if resumed now {eta}"
    lines.append(progress)
    lines.append("  success per configuration (successful/counted of visits done):")
    for c in s.configurations:
        share = f"{100 * c.successful / c.counted:.1f} %" if c.counted else "-"
        lines.append(
            f"    {c.resolver + '/' + c.protocol:<24} {c.successful:>6}/{c.counted:<6} {share:>7}"
            f"   ({c.done}/{c.visits} done)"
        )
    if s.replay:
        r = s.replay
        lines.append(
            f"  replayed web: {r.visits} visits, {r.misses} misses, {r.dns_misses} DNS misses (names not in the "
            f"archive), {r.errors} answers not given as recorded "
            f"(errors), {r.fuzzy} fuzzy matches, {r.filled} answers with a body made up at import"
        )
    lines += _fault_lines(s.faults, s.labs)
    lines += _block_lines(s.blocks)
    lines += _failure_lines("harness failures (retried, or recorded as Infrastructure Failure)", s.harness_failures)
    lines += _failure_lines("counted failures", s.counted_failures)
    return lines


def _fault_lines(faults: list[dict], labs: list[str]) -> list[str]:
    """The faults the study's labs carry now; one the study does not declare would refuse a crawl of it."""
    if not labs:
        return []  # crawled on the Internet, or by workers whose labs are on their own hosts
    if not faults:
        return [f"  lab faults active now ({', '.join(labs)}): none"]
    lines = [f"  lab faults active now ({', '.join(labs)}):"]
    for f in faults:
        owner = f", applied {f['owner']}" if f["owner"] else ""
        declared = "declared by the study" if f["declared"] else "NOT declared by the study: a crawl of it is refused"
        lines.append(f"    {f['place']}: {f['name']} at resolver {f['resolver']}{owner} ({declared})")
    return lines


def _block_lines(blocks: list[BlockOverview]) -> list[str]:
    """One line per block that has started; the blocks not started yet in one line."""
    lines = ["  blocks (round, network, visits done, last link check, timer run):"]
    waiting = [b.block for b in blocks if not b.done and not b.link_checks]
    for b in blocks:
        if b.block in waiting:
            continue
        lines.append(
            f"    {b.block:>4}  r{b.round} {b.network:<10} {b.done:>6}/{b.visits:<6} "
            f"{_link_check(b.link_checks)}; {_timer(b.timer)}"
        )
    if waiting:
        span = f"{waiting[0]}" if len(waiting) == 1 else f"{waiting[0]}-{waiting[-1]}"
        lines.append(f"    {span}: not started ({len(waiting)} block{'s' if len(waiting) > 1 else ''})")
    return lines


def _link_check(checks: list[LinkCheck]) -> str:
    """The block's last link check: its verdict, backend and how many checks it had."""
    if not checks:
        return "link not checked"
    last = checks[-1]
    missed = [k for k, ok in (last.verdicts or {}).items() if ok is False]
    if last.problem:
        verdict = f"link check FAILED: {last.problem}"
    elif missed:
        verdict = f"link off target: {', '.join(missed)}"
    else:
        verdict = "link on target"
    more = f", {len(checks)} checks" if len(checks) > 1 else ""
    return f"{verdict} ({last.backend or '?'}{more}, {_iso(last.checked_at)})"


def _timer(timer: TimerRun | None) -> str:
    if timer is None:
        return "not timed"
    problem = f", problems: {timer.problem}" if timer.problem else ""
    return f"timed {timer.hostnames} hostnames at {_iso(timer.timed_at)}{problem}"


def _failure_lines(title: str, failures: Sequence[FailedVisit]) -> list[str]:
    """The last failures of one kind, newest first."""
    from harness.store.records import HarnessFailure

    if not failures:
        return [f"  {title}: none"]
    lines = [f"  last {title}, newest first:"]
    for f in failures:
        detail = f.detail or ""
        if isinstance(f, HarnessFailure) and f.retried:
            last = f.retried[-1]
            retried = f"; retried {len(f.retried)}x, last: {last.get('error_class')}: {last.get('detail')}"
        else:
            retried = ""
        lines.append(
            f"    visit {f.ordinal} (block {f.block}, {f.network}) {f.resolver}/{f.protocol} "
            f"{f.site} {_iso(f.started_at, seconds=True)}: {f.error_class}"
            + (f": {detail}" if detail else "")
            + retried
        )
    return lines


def _iso(stored: str | None, seconds: bool = False) -> str:
    """A time the store holds in ISO form (UTC), in local time like every other time shown."""
    import datetime as dt

    try:
        moment = dt.datetime.fromisoformat(stored or "")
    except ValueError:
        return stored or "?"
    if moment.tzinfo is None:  # SQLite's own timestamps are UTC without saying so
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _clock(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))


def _ago(seconds: float) -> str:
    from harness.progress import human_duration

    return human_duration(max(0.0, seconds))
