"""YAML loading that remembers where each value came from, so errors can say file:line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from finetune.errors import UserError


def _walk(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
            out[path + (k,)] = key.start_mark.line + 1
            _walk(value, path + (k,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), out)


MAX_BYTES = 1 << 20  # a run spec is a page of settings; 1 MiB is far past any real one
MAX_DEPTH = 64  # nesting of mappings/sequences (the spec needs 4)


def _refuse(path: Path, mark: Any, what: str, fix: str) -> UserError:
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    return UserError(what, where=where, fix=fix)


def _check_events(text: str, path: Path) -> None:
    """Refuse what a spec never needs and an attacker uses: anchors/aliases (billion laughs, recursive
    aliases) and deep nesting. Runs on the parser's event stream, before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _refuse(path, event.start_mark, "YAML anchors and aliases (&name / *name) are not allowed in a "
                          "run spec", "write each value out in full")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise _refuse(path, event.start_mark, f"nested deeper than {MAX_DEPTH} levels",
                              "a run spec is a few levels of settings; flatten it")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _check_nodes(node: yaml.Node, path: Path) -> None:
    """Duplicate keys (YAML says they are an error; PyYAML keeps the last) and non-finite numbers."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in n.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else id(key)
                if k in seen:
                    raise _refuse(path, key.start_mark, f"duplicate key '{k}' (also on line {seen[k]})",
                                  "keep one of them")
                seen[k] = key.start_mark.line + 1
                stack += [key, value]
        elif isinstance(n, yaml.SequenceNode):
            stack += n.value
        elif n.tag == "tag:yaml.org,2002:float" and n.value.lower().lstrip("+-") in (".inf", ".nan"):
            raise _refuse(path, n.start_mark, f"'{n.value}' is not a finite number", "write a finite number")


def load_with_lines(path: str | Path) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse a YAML file; return (data, {path tuple: 1-based line}). Bad or hostile YAML → UserError."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UserError(f"file not found: {path}", fix="check the path") from None
    if path.is_dir():
        raise UserError(f"is a directory, not a file: {path}", fix="name the YAML file itself")
    if size > MAX_BYTES:
        raise UserError(f"file too large ({size} bytes; the limit is {MAX_BYTES})", where=str(path),
                        fix="a run spec is a page of settings: check you passed the right file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", where=str(path),
                        fix="save the file as UTF-8") from None
    try:
        _check_events(text, path)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_nodes(node, path)
        data = yaml.SafeLoader(text).get_single_data() if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"invalid YAML: {problem}", where=where, fix="fix the YAML syntax") from None
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _walk(node, (), lines)
    bad = _nonfinite_at(data, ())
    if bad is not None:  # e.g. 1e400, which YAML reads as a float that overflows to inf
        line = line_for(lines, bad)
        raise UserError(f"{'.'.join(map(str, bad)) or 'the value'} is not a finite number",
                        where=f"{path}:{line}" if line else str(path), fix="write a finite number")
    return data, lines


def _nonfinite_at(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if isinstance(data, float) and not math.isfinite(data):
        return loc
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = _nonfinite_at(v, loc + (k,))
        if found is not None:
            return found
    return None


def line_for(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    """Line of the deepest known prefix of ``loc`` (pydantic locs may include union tags)."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())
