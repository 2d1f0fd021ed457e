"""Load TOML profiles into pydantic models, with errors that name file, key and line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError
from harness.paths import checkout_hint

Model = TypeVar("Model", bound=BaseModel)

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def key_path(data: dict, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """The part of a pydantic error location that names keys of the TOML document.

    Discriminated unions add their tag (e.g. "recursive") to the location;
    a step absent from the document but followed by one present is such a
    tag and is dropped. A last absent step is a missing or unknown key.
    """
    path: list[str | int] = []
    node: object = data
    for i, part in enumerate(loc):
        if isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, dict) and i + 1 < len(loc) and loc[i + 1] in node:
            continue
        else:
            node = None
        path.append(part)
    return tuple(path)


def line_of(text: str, path: tuple[str | int, ...]) -> int | None:
    """Best-effort line number of the key at ``path`` (keys, and an array-of-tables index).

    TOML parsers do not report positions, so we scan: find the table header
    (the n-th ``[[table]]`` for an index), then the first ``key =`` line in it.
    """
    names = [p for p in path if isinstance(p, str)]
    index = next((p for p in path if isinstance(p, int)), None)
    if not names:
        return None
    if isinstance(path[-1], int) and len(path) > 1:  # an item of an array: its table, or else its key's line
        return _line_of(text, path, names, index) or line_of(text, path[:-1])
    return _line_of(text, path, names, index) or _header_line(text, ".".join(names))


def _header_line(text: str, table: str) -> int | None:
    """The line of ``[table]`` (a key that is a whole table)."""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header and header.group(1).strip() == table:
            return number
    return None


def _line_of(text: str, path: tuple[str | int, ...], names: list[str], index: int | None) -> int | None:
    if isinstance(path[-1], int):
        table_name, key = ".".join(names), None
    else:
        table_name, key = ".".join(names[:-1]), names[-1]
    inside = not table_name
    seen = -1
    table_line = None  # a missing key is reported at its table's header
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            inside = header.group(1).strip() == table_name
            if inside:
                seen += 1
                inside = index is None or seen == index
                if inside and key is None:
                    return number
                if inside:
                    table_line = number
            continue
        if inside and key is not None and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return number
    return table_line


def load_profile(path: Path, model: type[Model]) -> Model:
    """Parse ``path`` as TOML and validate it as ``model``.

    Raises HarnessError with ``file:line: key: problem`` on the first error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read profile: {exc.strerror}{checkout_hint()}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # An unknown key is usually the cause of a "missing" one (a typo): report it first.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        loc = key_path(data, tuple(first["loc"]))
        key = ".".join(str(k) for k in loc) or "(top level)"
        number = line_of(text, loc)
        where = f"{path}:{number}" if number else str(path)
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        value = first.get("input")
        # A whole table as "the value" would drown the message: name its key instead.
        shown = (
            ""
            if first["type"] in ("missing", "extra_forbidden") or isinstance(value, (dict, list))
            else f" (got {value!r})"
        )
        raise HarnessError(f"{where}: {key}: {message}{shown}") from exc
