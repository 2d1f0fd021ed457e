"""`dnsstudy study check`, `crawl` and `demo`: studies, from the plan to the store."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from harness.browser.registry import DEFAULT_BROWSER, browser_class
from harness.cli.analysis import effect_warnings, plan_power, power_lines, write_report
from harness.cli.common import console, lab_config, lab_options, one_line_errors, place_from
from harness.cli.lab import print_checks
from harness.lab.config import DEFAULT_LAB_PROFILE
from harness.paths import PROJECT_ROOT

pilot_option = click.option(
    "--pilot",
    "pilots",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A store whose pairs estimate each cell's spread for the power (repeat for several); "
    "default: the analysis profile's spreads.",
)


@click.group()
def study() -> None:
    """Study files (profiles/studies/*.toml): check one before crawling it."""


@study.command("check")
@click.argument("name")
@click.option(
    "--measured",
    "measured",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A store whose visit times estimate this study's (repeat for several); default: the study's own.",
)
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The study's store (default results/<study>/store.sqlite).",
)
@pilot_option
@one_line_errors
def study_check(name: str, measured: tuple[Path, ...], store_path: Path | None, pilots: tuple[Path, ...]) -> None:
    """Validate study NAME (a name in profiles/studies or a path), show its plan, whether it fits its duration
    and whether it detects the minimum effect it declares."""
    from harness.schedule import estimate, measured_seconds
    from harness.study import load_study

    loaded = load_study(name)
    s = loaded.study
    console.print(
        f"{loaded.path}: study '{s.name}' ({s.target}), seed {s.seed}, {s.rounds} round(s)"
        + (f" over {s.duration_days:g} days" if s.duration_days else "")
    )
    groups: dict[str, int] = {}
    for site in loaded.sites:
        groups[site.group] = groups.get(site.group, 0) + 1
    console.print(
        f"sites: {len(loaded.sites)} from {loaded.site_list.source} (list {loaded.site_list.list_id or '?'}): "
        + ", ".join(f"{g} {n}" for g, n in groups.items())
    )
    for note in loaded.site_list.converted_idns[:5]:
        console.print(f"  IDN converted: {note}")
    console.print(
        f"networks: {', '.join(s.networks)}; configurations ({len(s.configurations)}): "
        + ", ".join(f"{r}/{p}" for r, p in s.configurations)
        + (f"; browsers: {', '.join(s.browsers)}" if len(s.browsers) > 1 else "")
    )
    if s.target == "lab":
        from harness.lab.lab import Lab
        from harness.study import check_sites

        check_sites(loaded, Lab(lab_config(s.lab_profile or DEFAULT_LAB_PROFILE, None, None)))
    if s.faults:
        console.print("lab faults while it runs: " + ", ".join(f"{f.name} at {f.resolver}" for f in s.faults))
    others = [b for b in s.browsers if b != DEFAULT_BROWSER]  # the study's preferences are Firefox's
    console.print(
        f"browser DNS preferences: {s.browser_dns}"
        + "".join(f"; {b}: {browser_class(b).default_browser_dns}" for b in others)
    )
    times = measured_seconds([*measured, store_path or default_store(s.name)])
    console.print(estimate(loaded, times).summary())
    minimum = s.analysis.minimum_detectable_effect_ms
    if minimum is not None:
        warnings = effect_warnings(plan_power(loaded, list(pilots), None)[0], minimum)
        for line in warnings:
            console.print(line, style="yellow", markup=False, highlight=False)
        if not warnings:
            console.print(f"minimum detectable effect: every pair detects {minimum:g} ms at the planned power")


@study.command("power")
@click.argument("name")
@pilot_option
@click.option(
    "--difference",
    "difference_ms",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MS",
    help="A median difference (ms): the rounds, or the sites, that detect it.",
)
@click.option(
    "--profile",
    "analysis_profile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Analysis profile (default profiles/analysis/paper-2019.toml): the power, spreads and confidence.",
)
@one_line_errors
def study_power(
    name: str, pilots: tuple[Path, ...], difference_ms: float | None, analysis_profile: Path | None
) -> None:
    """Before the crawl: the smallest median difference each pair of configurations of study NAME detects with
    its sites and rounds (at the analysis profile's power, 80 %), from a pilot store's pairs or the profile's
    spreads; with --difference, the rounds that detect that difference."""
    from harness.study import load_study

    for line in power_lines(*plan_power(load_study(name), list(pilots), difference_ms, analysis_profile)):
        console.print(line, markup=False, highlight=False)


def default_store(study_name: str) -> Path:
    """results/<study>/store.sqlite in the checkout, wherever the command runs: a resume must find it."""
    return PROJECT_ROOT / "results" / study_name / "store.sqlite"


@click.command("crawl")
@click.argument("name")
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The results store (default results/<study>/store.sqlite in the checkout; HARs go beside it, in hars/).",
)
@click.option(
    "--moved",
    is_flag=True,
    help="The results directory (store and hars/) was moved or copied here: rewrite the store's HAR paths.",
)
@click.option(
    "--backend",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "netem", "userspace"]),
    help="Shaping backend.",
)
@click.option(
    "--internet", metavar="NAME", help="Run on the Internet side NAME ('dnsstudy internet up') instead of the lab."
)
@lab_options(profile_default=None)
@one_line_errors
def crawl(
    name: str,
    store_path: Path | None,
    moved: bool,
    backend: str,
    internet: str | None,
    profile: str | None,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Crawl study NAME into its store; run it again to resume where it stopped (Ctrl-C stops after a visit).

    Exit status 0 when the plan is done, 3 when stopped before, 2 on a harness failure (a dead or hung
    daemon, a full disk, another crawl of the same store or place).
    """
    from harness.crawl import Crawl, refuse_undeclared_faults
    from harness.lock import crawling
    from harness.store import Store
    from harness.study import load_study

    loaded = load_study(name)
    place = place_from(internet, profile or loaded.study.lab_profile or DEFAULT_LAB_PROFILE, prefix, subnet)
    # Absolute: the store and the HAR paths it records must not depend on where the command runs.
    path = (store_path or default_store(loaded.name)).resolve()
    with crawling(place, path):  # before the store is opened: a second crawl must not even create it
        refuse_undeclared_faults(loaded, place)  # nor a refused one
        crawl = Crawl(loaded, Store(path), place, path.parent, backend=backend, console=console, moved=moved)
        summary = crawl.run()
    summary.print_closing(console, path)
    sys.exit(0 if summary.finished else 3)


@click.command("demo")
@click.option(
    "--results",
    "results_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the store, HARs and report go (default results/<study> in the checkout).",
)
@click.option("--study", "study_name", default="lab-demo", show_default=True, help="The study to run.")
@lab_options(profile_default=None)
@one_line_errors
def demo(
    results_dir: Path | None, study_name: str, profile: str | None, prefix: str | None, subnet: str | None
) -> None:
    """The main job, end to end on the lab: bring it up, crawl the lab-demo study, analyse it, bring the lab down.

    Run it again to resume an interrupted demo; a finished one is only re-analysed.
    """
    from harness.demo import crawl_on_own_lab
    from harness.lab.lab import Lab
    from harness.study import load_study

    start = time.monotonic()
    loaded = load_study(study_name)
    lab = Lab(lab_config(profile or loaded.study.lab_profile or DEFAULT_LAB_PROFILE, prefix, subnet))
    results_dir = (results_dir or default_store(loaded.name).parent).resolve()
    store_path = results_dir / "store.sqlite"
    summary = crawl_on_own_lab(loaded, lab, store_path, console, print_checks)
    summary.print_closing(console, store_path)
    report = write_report([store_path], results_dir / "report")
    console.print(
        f"demo finished in {(time.monotonic() - start) / 60:.1f} min. Outputs: store {store_path}, "
        f"HARs {results_dir / 'hars'}, figures and tables {results_dir / 'report'}, report {report}"
    )
    sys.exit(0 if summary.finished else 3)
