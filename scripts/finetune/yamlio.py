"""YAML loading that remembers where each value came from, so errors can say file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from finetune.errors import UserError


def _walk(node: yaml.Node, path: tuple, out: dict[tuple, int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
            out[path + (k,)] = key.start_mark.line + 1
            _walk(value, path + (k,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), out)


def load_with_lines(path: str | Path) -> tuple[Any, dict[tuple, int]]:
    """Parse a YAML file; return (data, {path tuple: 1-based line}). Bad YAML → UserError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"file not found: {path}", fix="check the path") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", where=str(path),
                        fix="save the file as UTF-8") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"invalid YAML: {problem}", where=where, fix="fix the YAML syntax") from None
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    """Line of the deepest known prefix of ``loc`` (pydantic locs may include union tags)."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())
