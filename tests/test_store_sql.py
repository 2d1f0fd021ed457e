"""The store's SQL names its parameters (`:study_id`), never counts them (`?`, `?1`) (fast, no lab)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

STORE = Path(__file__).resolve().parent.parent / "harness" / "store"

#: A positional parameter: `?` or `?NNN` standing as a value (after `=`, `(`, `,`, an operator or a space).
POSITIONAL = re.compile(r"(?:^|[\s=(,<>+\-*/|])\?\d*(?=$|[\s,);])")
#: What makes a string SQL rather than prose (a docstring may ask a question).
SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|VALUES|WHERE|LIMIT|SET|PRAGMA|CREATE|ALTER)\b")


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal of a module (an f-string's literal parts joined), with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
    return found


def positional_sql(source: str) -> list[tuple[int, str]]:
    """The SQL strings of ``source`` that use a positional parameter, with their lines."""
    return [
        (line, text) for line, text in _strings(ast.parse(source)) if SQL_WORDS.search(text) and POSITIONAL.search(text)
    ]


def test_the_check_finds_positional_parameters_and_passes_named_ones():
    assert positional_sql('db.execute("SELECT a FROM t WHERE b = ? AND c = ?", (1, 2))')
    assert positional_sql('db.execute("INSERT INTO t VALUES (?,?)", (1, 2))')
    assert positional_sql('db.execute("UPDATE t SET a = ?1 WHERE b = ?2", (1, 2))')
    assert positional_sql('db.execute(f"SELECT {cols} FROM t WHERE b = ? LIMIT ?", (1, 2))')
    assert not positional_sql('db.execute("SELECT a FROM t WHERE b = :b LIMIT :limit", {"b": 1, "limit": 2})')
    assert not positional_sql('"""Whether the block is timed? SELECT it where it is."""')


def test_no_sql_string_in_the_store_uses_a_positional_parameter():
    modules = sorted(STORE.glob("*.py"))
    assert modules, f"no modules in {STORE}"
    offending = [
        f"{path.name}:{line}: {text.strip()[:80]}"
        for path in modules
        for line, text in positional_sql(path.read_text())
    ]
    assert offending == [], "positional SQL parameters (name them, :like_this): " + "; ".join(offending)


def test_every_column_the_analysis_reads_is_in_a_new_store(tmp_path):
    """The schema is the only contract between harness and analysis, and neither imports the other: the columns
    the analysis names must be the store's, or a rename on one side would only fail when someone analyses."""
    from analysis import results
    from harness.store import Store

    store = Store(tmp_path / "s.sqlite")
    have = {
        table: {row[1] for row in store.db.execute(f"PRAGMA table_info({table})")} for table in ("visits", "timings")
    }
    store.close()
    assert set(results.VISIT_COLUMNS) - have["visits"] == set()
    assert set(results.METRIC_COLUMNS) - have["visits"] == set()
    assert (set(results.TIMING_COLUMNS) | set(results.OPTIONAL_TIMING_COLUMNS)) - have["timings"] == set()
