"""What the code imports is declared, what is declared is locked, and the version is in one place (fast).

`pip install .` must give every command working: pyproject.toml declares every distribution the code
under harness/ and analysis/ imports (the tests, benchmarks and scripts may use the `dev` extra too).
requirements.txt and requirements-dev.txt are the one lock, in two halves: every declared distribution and
everything those need, at one exact version that meets pyproject's bound, and what the environment running
these tests has installed. The run-time half (requirements.txt, all the image installs) holds exactly what the
dependencies and the build need, so no test or lint tool reaches the image; the development half adds the rest.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, packages_distributions, requires, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"harness", "analysis", "tests", "benchmarks", "scripts"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _declared(requirements: Iterable[str]) -> dict[str, Requirement]:
    """Requirement strings by canonical distribution name."""
    return {canonicalize_name(r.name): r for r in map(Requirement, requirements)}


RUNTIME_LOCK, DEV_LOCK = "requirements.txt", "requirements-dev.txt"


def _pins(lock: str) -> dict[str, str]:
    """One half of the lock: canonical name -> pinned version (the `-r` that includes the other half skipped)."""
    pins: dict[str, str] = {}
    for line in (ROOT / lock).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-r "):
            name, _, pinned = line.partition("==")
            pins[canonicalize_name(name.split("[")[0])] = pinned
    return pins


def _lock() -> dict[str, str]:
    """The whole lock, both halves: canonical name -> pinned version."""
    return {**_pins(RUNTIME_LOCK), **_pins(DEV_LOCK)}


def _runtime_roots() -> list[str]:
    """What the run-time half must serve: the project's dependencies and its build's requirements."""
    data = _pyproject()
    return [*data["project"]["dependencies"], *data["build-system"]["requires"]]


def closure(roots: Iterable[str]) -> set[str]:
    """Canonical names of the installed distributions ``roots`` need, transitively (their extras followed)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    stack = [Requirement(r) for r in roots]
    while stack:
        req = stack.pop()
        key = (canonicalize_name(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        for line in requires(req.name) or []:
            need = Requirement(line)
            if need.marker is None or any(need.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                stack.append(need)
    return {name for name, _ in seen}


def imported_modules(paths: Iterable[Path]) -> dict[str, Path]:
    """Top-level modules of third parties the files import, anywhere in them (inside functions too),
    each with one file that imports it."""
    found: dict[str, Path] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, path)
    return found


def undeclared(paths: Iterable[Path], declared: set[str]) -> list[str]:
    """One line per imported distribution that ``declared`` (canonical names) lacks, naming a file that
    imports it; and per imported module no installed distribution provides."""
    providers = packages_distributions()
    problems = []
    for module, path in sorted(imported_modules(paths).items()):
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        dists = providers.get(module)
        if not dists:
            problems.append(f"{where} imports '{module}', which no installed distribution provides")
            continue
        missing = sorted({d for d in dists if canonicalize_name(d) not in declared})
        if missing and len(missing) == len(dists):
            problems.append(
                f"{where} imports '{module}' from {', '.join(missing)}, which pyproject.toml does not declare"
            )
    return problems


def _files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_pyproject_declares_every_distribution_the_code_imports():
    declared = set(_declared(_pyproject()["project"]["dependencies"]))
    assert undeclared(_files("harness", "analysis"), declared) == []


def test_tests_benchmarks_and_scripts_import_only_what_pyproject_declares_with_the_dev_extra():
    project = _pyproject()["project"]
    declared = set(_declared(project["dependencies"])) | set(_declared(project["optional-dependencies"]["dev"]))
    assert undeclared(_files("tests", "benchmarks", "scripts"), declared) == []


def test_an_undeclared_import_is_named_with_its_distribution_and_file(tmp_path):
    source = tmp_path / "uses_yaml.py"
    source.write_text("import json\n\ndef load(text):\n    from yaml import safe_load\n    return safe_load(text)\n")
    problems = undeclared([source], {"click"})
    assert len(problems) == 1
    assert "'yaml'" in problems[0] and "PyYAML" in problems[0] and "uses_yaml.py" in problems[0]
    assert undeclared([source], {"pyyaml"}) == []


def test_the_lock_pins_every_declared_distribution_within_its_bounds():
    project, lock = _pyproject()["project"], _lock()
    wanted = _declared([*project["dependencies"], *project["optional-dependencies"]["dev"]])
    missing = sorted(name for name in wanted if name not in lock)
    assert missing == [], f"declared in pyproject.toml, not pinned in {RUNTIME_LOCK} or {DEV_LOCK}: {missing}"
    outside = sorted(f"{name}=={lock[name]} ({r})" for name, r in wanted.items() if lock[name] not in r.specifier)
    assert outside == [], f"pinned outside pyproject.toml's bounds: {outside}"


def test_the_lock_is_closed_and_installed():
    """Everything a pinned distribution needs here (its extras that pyproject asks for included) is pinned too,
    and the environment these tests run in holds exactly the pinned versions (scripts/setup.sh venv)."""
    project, lock = _pyproject()["project"], _lock()
    extras: dict[str, set[str]] = {}
    for r in _declared([*project["dependencies"], *project["optional-dependencies"]["dev"]]).values():
        extras.setdefault(canonicalize_name(r.name), set()).update(r.extras)
    unpinned, drift = set(), []
    for name, pinned in lock.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            drift.append(f"{name}=={pinned} is not installed")
            continue
        if installed != pinned:
            drift.append(f"{name} is {installed}, the lock says {pinned}")
        for line in requires(name) or []:
            need = Requirement(line)
            wanted_for = [{"extra": e} for e in ("", *extras.get(name, ()))]
            if need.marker is None or any(need.marker.evaluate(env) for env in wanted_for):
                if canonicalize_name(need.name) not in lock:
                    unpinned.add(f"{need.name} (needed by {name})")
    assert sorted(unpinned) == [], f"not pinned in {RUNTIME_LOCK} or {DEV_LOCK}"
    assert drift == [], "the environment is not the lock: run 'bash scripts/setup.sh venv'"


def test_the_lock_halves_are_one_lock():
    """Development includes run time, and no distribution is pinned in both (one version, in one place)."""
    assert "-r requirements.txt" in (ROOT / DEV_LOCK).read_text().splitlines()
    twice = sorted(set(_pins(RUNTIME_LOCK)) & set(_pins(DEV_LOCK)))
    assert twice == [], f"pinned in both {RUNTIME_LOCK} and {DEV_LOCK}: {twice}"


def test_the_runtime_half_is_what_the_tool_needs_and_nothing_else():
    """requirements.txt (all the image installs) is the closure of pyproject's dependencies and build
    requirements: nothing they need is only in the development half, and no test or lint tool is in it."""
    needed, runtime = closure(_runtime_roots()), set(_pins(RUNTIME_LOCK))
    assert sorted(needed - runtime) == [], f"needed at run time, not in {RUNTIME_LOCK}"
    assert sorted(runtime - needed) == [], f"in {RUNTIME_LOCK}, needed only by the development tools"
    assert {"pytest", "mypy", "ruff", "jedi", "ipykernel"} <= set(_pins(DEV_LOCK))


def test_the_closure_follows_requirements_and_their_extras():
    """The reader of installed metadata finds what is known: httpx[http2] needs h2, pytest needs pluggy."""
    assert {"httpx", "httpcore", "h2", "hpack"} <= closure(["httpx[http2]"])
    assert "h2" not in closure(["httpx"])
    assert "pluggy" in closure(["pytest"])


def test_the_version_is_in_one_place():
    """harness/__init__.py holds it; pyproject.toml reads it from there at build time, and names none itself."""
    data = _pyproject()
    assert "version" not in data["project"] and "version" in data["project"]["dynamic"]
    assert data["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "harness.__version__"}
    import harness

    assert harness.__version__ and harness.__version__[0].isdigit()


@pytest.mark.parametrize("folder", ["harness", "analysis"])
def test_the_import_reader_sees_the_code(folder):
    """The reader finds the third parties the code is known to use (so an empty result means something)."""
    modules = imported_modules(_files(folder))
    assert {"harness": {"click", "celery", "redis"}, "analysis": {"pandas", "matplotlib"}}[folder] <= set(modules)


def test_an_installed_copy_finds_the_checkout_it_is_run_in(tmp_path):
    """`pip install .` puts the package in site-packages, away from profiles/: run in a checkout (or with
    $DNSSTUDY_ROOT), the command finds it; anywhere else its errors say what to do."""
    from harness.paths import project_root

    site = tmp_path / "site-packages"
    site.mkdir()
    checkout = tmp_path / "checkout"
    (checkout / "profiles").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    assert project_root(None, ROOT, tmp_path) == ROOT  # the package in its own checkout
    assert project_root(None, site, checkout) == checkout
    assert project_root(None, site, tmp_path) == site
    assert project_root(str(checkout), site, tmp_path) == checkout
