"""The shape of the code: imports run one way, modules and functions stay readable (fast, no lab)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "analysis")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside `if TYPE_CHECKING:` blocks: those imports never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def _imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: climb from the importing module's package
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, at module level or inside functions, `TYPE_CHECKING` aside."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for target in _imported_names(node, package):
            while target and target not in known:  # `from a.b import name`: the module is a.b
                target = target.rpartition(".")[0]
            # a package's face importing its own submodules is not a cycle
            if target and target != name and not target.startswith(name + "."):
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every project module and the project modules it imports."""
    modules = _modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as the list of modules around it (first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_names_a_cycle_it_is_given():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import place\n"
        "def f():\n    from harness.arms import base\n"
    )
    known = {"harness", "harness.place", "harness.arms", "harness.arms.base"}
    assert imports_of("m", module, known) == {"harness.arms", "harness.arms.base"}  # a package runs its face


def test_protocols_is_a_leaf():
    graph = import_graph()
    assert graph["harness.protocols"] <= {"harness.errors"}


def test_analysis_imports_nothing_from_the_harness():
    graph = import_graph()
    crossing = {name: sorted(m for m in deps if m.startswith("harness")) for name, deps in graph.items()}
    assert {name: deps for name, deps in crossing.items() if name.startswith("analysis") and deps} == {}


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_or_function_is_too_long_to_read_whole(package):
    too_long: list[str] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(ROOT)
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {lines} lines")
        for function in _functions(ast.parse(text)):
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > MAX_FUNCTION_LINES:
                too_long.append(f"{rel}:{function.lineno} {function.name}: {length} lines")
    assert too_long == [], "over the limits: " + "; ".join(too_long)


ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _module_path(name: str) -> str:
    path = ROOT / Path(*name.split("."))
    return str((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).relative_to(ROOT))


def _documented_files() -> list[str]:
    """Every file docs/architecture.md must name: the packages' modules, the benchmarks, the scripts, and the
    test modules that are not tests themselves (helpers, fakes, fixtures)."""
    files = [_module_path(name) for name in sorted(_modules())]
    files += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "benchmarks").glob("*.py"))]
    files += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "scripts").glob("*.py"))]
    files += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").glob("*.py")) if not p.name.startswith("test_")]
    return files


def test_docs_architecture_names_every_module():
    text = ARCHITECTURE.read_text()
    missing = [path for path in _documented_files() if f"`{path}`" not in text]
    assert missing == [], f"docs/architecture.md does not name: {', '.join(missing)}"


def layers_from_docs(text: str) -> dict[str, int]:
    """The layer table of docs/architecture.md: each path (a module, or a folder ending in /) -> its layer."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, int] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0][:1].isdigit():
            continue
        level = int(cells[0].split()[0])
        for path in cells[1].replace("`", "").split(","):
            if path.strip():
                table[path.strip()] = level
    return table


def layer_of(module_path: str, table: dict[str, int]) -> int | None:
    """The layer of the most specific entry that covers ``module_path`` (the file itself, else its folders)."""
    if module_path in table:
        return table[module_path]
    folders = [p for p in table if p.endswith("/") and module_path.startswith(p)]
    return table[max(folders, key=len)] if folders else None


def test_imports_run_downward_through_the_documented_layers():
    table = layers_from_docs(ARCHITECTURE.read_text())
    graph = import_graph()
    layers = {name: layer_of(_module_path(name), table) for name in graph}
    assert [n for n, level in layers.items() if level is None] == [], "modules with no layer in docs/architecture.md"
    upward = [
        f"{name} (layer {layers[name]}) imports {dep} (layer {layers[dep]})"
        for name, deps in sorted(graph.items())
        for dep in sorted(deps)
        if (layers[dep] or 0) > (layers[name] or 0)
    ]
    assert upward == [], "imports against the layers: " + "; ".join(upward)


def test_the_layer_table_reader_takes_folders_and_files():
    text = "## Layers\n\n| layer | paths |\n| --- | --- |\n| 2 runs | `a/run.py`, `a/b/` |\n| 1 base | `a/` |\n"
    table = layers_from_docs(text)
    assert layer_of("a/run.py", table) == 2 and layer_of("a/b/c.py", table) == 2 and layer_of("a/x.py", table) == 1
    assert layer_of("z/y.py", table) is None


BROWSER_PACKAGE = ROOT / "harness" / "browser"


def browser_classes(sources: dict[str, str]) -> dict[str, tuple[str | None, set[str]]]:
    """Every class in ``sources`` (module name -> text): the browser its name names, if any (a name that
    `register_browser` is given, case aside), and the names of its direct bases."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    browsers = {
        str(decorator.args[0].value).lower()
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for decorator in node.decorator_list
        if isinstance(decorator, ast.Call)
        and ast.unparse(decorator.func).endswith("register_browser")
        and decorator.args
        and isinstance(decorator.args[0], ast.Constant)
    }
    classes: dict[str, tuple[str | None, set[str]]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                named = [b for b in sorted(browsers) if b in node.name.lower()]
                bases = {ast.unparse(base).rpartition(".")[2] for base in node.bases}
                classes[node.name] = (named[0] if named else None, bases)
    return classes


def cross_browser_inheritance(classes: dict[str, tuple[str | None, set[str]]]) -> list[str]:
    """Classes of one browser with an ancestor (however far up) of another browser: "Class < Ancestor"."""
    found = []
    for name, (browser, _) in sorted(classes.items()):
        pending, seen = list(classes[name][1]), set()
        while pending:
            base = pending.pop()
            if base in seen or base not in classes:
                continue
            seen.add(base)
            other = classes[base][0]
            if browser and other and other != browser:
                found.append(f"{name} < {base}")
            pending.extend(classes[base][1])
    return found


def test_no_browser_class_inherits_another_browser_s():
    sources = {p.stem: p.read_text() for p in sorted(BROWSER_PACKAGE.rglob("*.py"))}
    classes = browser_classes(sources)
    assert {"firefox", "chromium"} <= {b for b, _ in classes.values() if b}, "the rule must see both browsers"
    assert cross_browser_inheritance(classes) == []


def test_the_browser_rule_names_a_class_that_inherits_another_browser_s():
    sources = {
        "a": '@register_browser("firefox")\nclass Firefox(Browser):\n    pass\nclass FirefoxSession(Base):\n    pass\n',
        "b": '@register_browser("chromium")\nclass Chromium(Browser):\n    pass\n'
        "class ChromiumSession(session.FirefoxSession):\n    pass\nclass ReusedChromium(ChromiumSession):\n    pass\n",
    }
    found = cross_browser_inheritance(browser_classes(sources))
    assert found == ["ChromiumSession < FirefoxSession", "ReusedChromium < FirefoxSession"]
