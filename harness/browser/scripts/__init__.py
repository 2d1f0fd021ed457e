"""The JavaScript a visit runs inside the browser, one file per script, read from the package.

Each file is a WebDriver script: a function body (it may `return`, and reads its
arguments as `arguments[i]`), run in the page's context or, where its first line
says so, in Firefox's privileged chrome context. They ship as package data
(pyproject.toml), so an installed copy has them too.
"""

from __future__ import annotations

from importlib import resources


def script(name: str) -> str:
    """The text of ``name``.js in this package (FileNotFoundError if there is none)."""
    return resources.files(__name__).joinpath(f"{name}.js").read_text(encoding="utf-8")


def names() -> list[str]:
    """Every script in the package, by name (without .js), sorted."""
    return sorted(p.name.removesuffix(".js") for p in resources.files(__name__).iterdir() if p.name.endswith(".js"))
