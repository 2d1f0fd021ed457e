"""Load TOML profiles into pydantic models, with errors that name file, key and line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError

Model = TypeVar("Model", bound=BaseModel)

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def line_of(text: str, loc: tuple[str | int, ...]) -> int | None:
    """Best-effort line number of the key at ``loc`` (a pydantic error location).

    TOML parsers do not report positions, so we scan: find the table header
    for the leading keys, then the first ``key =`` line inside it.
    """
    keys = [str(k) for k in loc if not isinstance(k, int)]
    if not keys:
        return None
    lines = text.splitlines()
    for split in range(len(keys) - 1, -1, -1):
        table, key = keys[:split], keys[split] if split < len(keys) else None
        table_name = ".".join(table)
        inside = not table
        for number, line in enumerate(lines, start=1):
            header = _HEADER.match(line)
            if header:
                name = header.group(1).strip()
                if name == table_name and key is None:
                    return number
                inside = name == table_name
                continue
            if inside and key is not None and re.match(
                rf"^\s*\"?{re.escape(key)}\"?\s*=", line
            ):
                return number
    return None


def load_profile(path: Path, model: type[Model]) -> Model:
    """Parse ``path`` as TOML and validate it as ``model``.

    Raises HarnessError with ``file:line: key: problem`` on the first error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read profile: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        key = ".".join(str(k) for k in loc) or "(top level)"
        number = line_of(text, loc)
        where = f"{path}:{number}" if number else str(path)
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        value = first.get("input")
        shown = "" if first["type"] in ("missing", "extra_forbidden") else f" (got {value!r})"
        raise HarnessError(f"{where}: {key}: {message}{shown}") from exc
