"""The one JSON / JSONL writer and reader of the package.

Why one module: a JSONL file is only as good as its line discipline. ``json.dumps(...,
ensure_ascii=False)`` leaves U+2028, U+2029 and U+0085 raw, and ``str.splitlines()`` splits on them,
so a note containing one used to corrupt verdicts.jsonl for every later command. Here:

* writing escapes every character ``str.splitlines()`` treats as a line break (JSON already escapes
  the C0 ones; U+0085, U+2028 and U+2029 are escaped here), and refuses NaN / ±Infinity
  (``allow_nan=False``) — or, where a caller documents it (``nonfinite="null"``), writes ``null``;
* reading splits only on ``\\n``, refuses NaN / Infinity unless the caller reads a foreign file that
  may hold them (TRL's logs), and turns every bad line into a :class:`UserError` naming file:line.

Writes are atomic (temp file + rename, :mod:`finetune.atomic`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from finetune.errors import UserError

# Characters str.splitlines() breaks on that json.dumps(ensure_ascii=False) leaves raw.
_RAW_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
Nonfinite = Literal["refuse", "null"]


class NonFiniteError(ValueError):
    """A NaN / Infinity reached a writer that refuses them; ``where`` is the key path."""

    def __init__(self, where: str):
        self.where = where
        super().__init__(f"non-finite number at {where}")


def _escape_breaks(text: str) -> str:
    for raw, esc in _RAW_BREAKS.items():
        if raw in text:
            text = text.replace(raw, esc)
    return text


def _finite(obj: Any, nonfinite: Nonfinite, where: str = "$") -> Any:
    """A copy of ``obj`` with non-finite floats replaced by None, or NonFiniteError naming the spot."""
    if isinstance(obj, float) and not math.isfinite(obj):
        if nonfinite == "null":
            return None
        raise NonFiniteError(where)
    if isinstance(obj, dict):
        return {k: _finite(v, nonfinite, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v, nonfinite, f"{where}[{i}]") for i, v in enumerate(obj)]
    return obj


def finite_or_null(obj: Any) -> Any:
    """``obj`` as a ``nonfinite="null"`` writer stores it (for comparing in-memory rows with a file)."""
    return _finite(obj, "null")


def dumps(obj: Any, *, indent: int | None = None, nonfinite: Nonfinite = "refuse", sort_keys: bool = False) -> str:
    """JSON text with no raw line separators and no NaN/Infinity (see module doc)."""
    if nonfinite == "null":
        obj = _finite(obj, "null")
    try:
        text = json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys,
                          separators=None if indent else (", ", ": "))
    except ValueError:
        _finite(obj, "refuse")  # raises NonFiniteError naming where
        raise
    return _escape_breaks(text)


def dumps_line(obj: Any, *, nonfinite: Nonfinite = "refuse") -> str:
    """One JSONL line (no trailing newline); guaranteed to contain no character splitlines() splits on."""
    return dumps(obj, nonfinite=nonfinite)


def _text(path: Path, text_fn: Callable[[], str]) -> str:
    try:
        return text_fn()
    except NonFiniteError as exc:
        raise UserError(f"refusing to write a non-finite number (NaN or Infinity) at {exc.where}", where=str(path),
                        fix="the value must be a finite number") from None


def json_text(path: str | Path, obj: Any, *, nonfinite: Nonfinite = "refuse") -> str:
    """The text :func:`write_json` writes to ``path`` (for a multi-file commit, :mod:`finetune.commit`)."""
    return _text(Path(path), lambda: dumps(obj, indent=2, nonfinite=nonfinite) + "\n")


def jsonl_text(path: str | Path, rows: Iterable[Any], *, nonfinite: Nonfinite = "refuse") -> str:
    """The text :func:`write_jsonl` writes to ``path`` (for a multi-file commit, :mod:`finetune.commit`)."""
    return _text(Path(path), lambda: "".join(dumps_line(r, nonfinite=nonfinite) + "\n" for r in rows))


def write_json(path: str | Path, obj: Any, *, nonfinite: Nonfinite = "refuse") -> Path:
    """Write one JSON document (indented), atomically."""
    from finetune import atomic

    return atomic.write_text(path, json_text(path, obj, nonfinite=nonfinite))


def write_jsonl(path: str | Path, rows: Iterable[Any], *, nonfinite: Nonfinite = "refuse") -> Path:
    """Write one JSON value per line, atomically."""
    from finetune import atomic

    return atomic.write_text(path, jsonl_text(path, rows, nonfinite=nonfinite))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} (JSON has no NaN/Infinity)")


def loads(text: str, *, allow_nan: bool = False) -> Any:
    """Parse JSON text; NaN / Infinity are refused unless ``allow_nan`` (ValueError either way on bad input)."""
    return json.loads(text) if allow_nan else json.loads(text, parse_constant=_refuse_constant)


def read_text(path: str | Path) -> str:
    """A file's UTF-8 text; missing / directory / not UTF-8 → UserError naming the path."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"file not found: {path}", fix="check the path") from None
    except IsADirectoryError:
        raise UserError(f"is a directory, not a file: {path}", fix="name the file itself") from None
    except PermissionError:
        raise UserError(f"permission denied reading {path}", fix="make the file readable") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", where=str(path),
                        fix="save the file as UTF-8") from None


def read_json(path: str | Path, *, allow_nan: bool = False, fix: str | None = None) -> Any:
    """Parse a JSON file; every problem → UserError naming file:line."""
    path = Path(path)
    text = read_text(path)
    try:
        return loads(text, allow_nan=allow_nan)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}",
                        fix=fix or "re-create it with the finetune command that writes it") from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"invalid JSON: {str(exc)[:120]}", where=str(path),
                        fix=fix or "re-create it with the finetune command that writes it") from None


def read_jsonl(path: str | Path, *, allow_nan: bool = False, fix: str | None = None) -> list[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line, split on ``\\n`` only; bad line → UserError file:line."""
    path = Path(path)
    out = []
    for n, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            out.append((n, loads(line, allow_nan=allow_nan)))
        except json.JSONDecodeError as exc:
            raise UserError(f"invalid JSON: {exc.msg}", where=f"{path}:{n}",
                            fix=fix or "write one JSON object per line") from None
        except (ValueError, RecursionError) as exc:
            raise UserError(f"invalid JSON: {str(exc)[:120]}", where=f"{path}:{n}",
                            fix=fix or "write one JSON object per line") from None
    return out


def read_json_object(path: str | Path, *, what: str, fix: str | None = None) -> dict[str, Any]:
    """read_json, and the top level must be an object (a ``[1]`` gate.json is bad input, not a traceback)."""
    data = read_json(path, fix=fix)
    if not isinstance(data, dict):
        raise UserError(f"{what} must be a JSON object, found {type(data).__name__}", where=str(path),
                        fix=fix or "re-create it with the finetune command that writes it")
    return data
