"""What every command group shares: the consoles, one-line errors, place options, protocol choices."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from harness.errors import HarnessError
from harness.lab.config import DEFAULT_LAB_PROFILE, LabConfig, load_lab_config
from harness.place import Place

if TYPE_CHECKING:
    from harness.lab.lab import Lab

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(fn: F) -> F:
    """Turn HarnessError into `dnsstudy: error: ...` and exit status 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HarnessError as exc:
            err_console.print(f"dnsstudy: error: {exc}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def lab_options(profile_default: str | None = DEFAULT_LAB_PROFILE) -> Callable[[F], F]:
    """--profile, --prefix and --subnet, shared by every command that names a lab.

    ``profile_default`` None: the command picks the profile (a study's own lab profile).
    """

    def decorate(fn: F) -> F:
        fn = click.option("--subnet", help="IPv4 /23 for the lab (overrides the profile).")(fn)
        fn = click.option("--prefix", help="Lab name prefix; another prefix is another lab (overrides the profile).")(
            fn
        )
        help_text = (
            "Lab profile (TOML)."
            if profile_default
            else "Lab profile (TOML; default: the study's lab_profile, else the default lab)."
        )
        return click.option(
            "--profile", "profile", default=profile_default, show_default=bool(profile_default), help=help_text
        )(fn)

    return decorate


def place_options(fn: F) -> F:
    """--internet NAME, or the lab options: where the command runs."""
    fn = lab_options()(fn)
    return click.option(
        "--internet", metavar="NAME", help="Run on the Internet side NAME ('dnsstudy internet up') instead of the lab."
    )(fn)


def lab_config(profile: str, prefix: str | None, subnet: str | None) -> LabConfig:
    """The lab profile with the command line's overrides; a bad override is one line naming the option."""
    from pydantic import ValidationError

    config = load_lab_config(profile)
    try:
        return config.with_overrides(prefix=prefix, subnet=subnet)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(k) for k in first["loc"])
        raise HarnessError(f"--{key}: {first['msg']} (got {first.get('input')!r})") from exc


def lab_from(profile: str, prefix: str | None, subnet: str | None) -> Lab:
    """The lab a profile and the command line's overrides name (not brought up)."""
    from harness.lab.lab import Lab  # imported when used: `dnsstudy --help` stays quick

    return Lab(lab_config(profile, prefix, subnet))


def place_from(internet: str | None, profile: str, prefix: str | None, subnet: str | None) -> Place:
    """The named Internet side, or the lab."""
    if internet:
        from harness.internet.side import InternetSide

        return InternetSide.named(internet)
    return lab_from(profile, prefix, subnet)


class ProtocolChoice(click.Choice):
    """The protocols of a registry list, read when the command runs (so a newly registered arm is offered).

    click.Choice reads `self.choices` wherever it validates, completes or prints them (click 8.5); here
    that attribute is a view of the registry, and the tuple click.Choice.__init__ assigns is ignored.
    """

    def __init__(self, source: Callable[[], list[str]]):
        self.source = source
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.source())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass
