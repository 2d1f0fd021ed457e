"""Run the test suite (or a selection) N times in a row and report which tests are flaky.

The README's test command must be green every time: a test that fails once
in thirty runs is as much a bug as one that always fails, and only repeated
runs show it. Each run writes a JUnit XML report into a temporary directory;
the sweep then prints every test that failed at least once (failures out of
N, first line of its first failure message) and per-run totals. Exit status 1 if any test failed (or errored) in
any run, 0 otherwise.

    .venv/bin/python scripts/flaky_sweep.py --runs 10 -- tests/test_timer.py -k wire

Standard library only, so it also runs before the virtual environment exists
(pytest itself must be importable by the interpreter given with --python).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunResult:
    """Totals of one pytest run, and the failure message of each test that failed in it."""

    index: int
    returncode: int
    seconds: float
    passed: int = 0
    skipped: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # test id -> first line of the message


def parse_junit(path: Path) -> tuple[int, int, dict[str, str]]:
    """(passed, skipped, {test id: first message line}) from one JUnit XML report.

    Failures and errors (an error in a fixture is as much a red run as a
    failed assert) are both counted as failed.
    """
    passed = skipped = 0
    failed: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            text = bad.get("message") or bad.text or ""
            failed[test_id] = next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, skipped, failed


def run_once(index: int, python: str, pytest_args: list[str], workdir: Path, timeout: float) -> RunResult:
    """One pytest run; its JUnit report goes into ``workdir``. A run that times out counts as failed."""
    report = workdir / f"run-{index}.xml"
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [python, "-m", "pytest", f"--junitxml={report}", "-q", *pytest_args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        returncode = -1
    result = RunResult(index, returncode, time.monotonic() - start)
    if report.exists():
        result.passed, result.skipped, result.failures = parse_junit(report)
    if returncode not in (0, 5) and not result.failures:  # 5: nothing collected
        result.failures["(pytest run)"] = "timed out" if returncode == -1 else f"pytest exited {returncode}"
    return result


def render(results: list[RunResult]) -> str:
    """The table of failing tests, then per-run totals."""
    runs = len(results)
    counts: dict[str, int] = {}
    first_message: dict[str, str] = {}
    for r in results:
        for test_id, message in r.failures.items():
            counts[test_id] = counts.get(test_id, 0) + 1
            first_message.setdefault(test_id, message)
    lines = []
    if counts:
        width = max(len(t) for t in counts)
        lines.append(f"{'test':<{width}}  failed  first message")
        for test_id in sorted(counts, key=lambda t: (-counts[t], t)):
            lines.append(f"{test_id:<{width}}  {counts[test_id]:>2}/{runs:<3}  {first_message[test_id][:160]}")
    else:
        lines.append(f"no test failed in {runs} runs")
    lines.append("")
    lines.append(f"{'run':>3}  {'passed':>6}  {'failed':>6}  {'skipped':>7}  {'seconds':>8}")
    for r in results:
        lines.append(f"{r.index:>3}  {r.passed:>6}  {len(r.failures):>6}  {r.skipped:>7}  {r.seconds:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="Arguments after -- go to pytest unchanged."
    )
    parser.add_argument("--runs", type=int, default=10, help="how many runs in a row (default 10)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest (default: this one)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one run may take (default 3600)")
    args, pytest_args = parser.parse_known_args(argv)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    results = []
    with tempfile.TemporaryDirectory(prefix="flaky-sweep-") as tmp:
        for i in range(1, args.runs + 1):
            r = run_once(i, args.python, pytest_args, Path(tmp), args.timeout)
            print(
                f"run {i}/{args.runs}: {r.passed} passed, {len(r.failures)} failed, {r.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            results.append(r)
    print(render(results))
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
