"""The one escaping helper: every value that reaches generated code or text goes through a filter here.

A spec string is data, never code. Each filter turns a value into a form that the target language
reads back as exactly that value (a Python literal, a shell word, a YAML scalar, JSON) or into text
that cannot leave the place it is put in (a comment, a docstring, Markdown). Every Jinja environment
the project builds registers these filters (:func:`register`) and is strict about unknown names;
tests/test_literals_injection.py renders every template with hostile strings and a static test fails
when a template prints a spec-derived value without one of these filters.
"""

from __future__ import annotations

import json as _json
import keyword
import math
import re
import shlex
import unicodedata
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

# Characters str.splitlines() (and YAML 1.1, and some editors) treat as line breaks, plus NUL.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\x00"
_MD_SPECIAL = set("\\*[]|~$")  # emphasis, links/images, table cells, strike-through, math

#: Filters that make a value safe for its destination; the static template test accepts these.
ESCAPING_FILTERS = ("py", "py_ident", "py_module", "py_comment", "py_doc", "sh", "sh_comment", "yaml", "yaml_comment",
                    "json", "md", "md_code")


class LiteralError(ValueError):
    """A value that has no safe literal form for the requested destination (e.g. not an identifier)."""


def py(value: Any) -> str:
    """A Python expression that evaluates to ``value`` (str/bytes/numbers/bool/None and containers).

    ``repr`` of a str escapes quotes, backslashes, newlines, U+2028, NUL and lone surrogates, so the
    result is one ASCII-safe token whatever the string holds. Non-finite floats become ``float("inf")``
    (``repr`` would give the bare name ``inf``); anything else (objects whose repr is code) is refused.
    """
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value!r}")'
    if isinstance(value, (str, bytes)):
        return _ascii_repr(value)
    if isinstance(value, PurePath):
        return _ascii_repr(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(py(v) for v in value) + "]"
    if isinstance(value, tuple):
        items = [py(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py(k)}: {py(v)}" for k, v in value.items()) + "}"
    raise LiteralError(f"no Python literal for a {type(value).__name__}")


def _ascii_repr(value: str | bytes) -> str:
    # ascii() is repr() with every non-ASCII character escaped: the file stays valid UTF-8 even for a
    # lone surrogate, and no look-alike or bidi control character appears in generated source.
    return ascii(value)


def py_ident(value: Any) -> str:
    """A validated Python identifier (a reward function name); anything else is refused."""
    if not isinstance(value, str) or not value.isidentifier() or not value.isascii() or keyword.iskeyword(value):
        raise LiteralError(f"{value!r} is not a plain Python identifier")
    return value


def py_module(value: Any) -> str:
    """A validated dotted module name (``concurrent.futures``); anything else is refused."""
    if not isinstance(value, str) or not all(part and py_ident(part) for part in value.split(".")):
        raise LiteralError(f"{value!r} is not a module name")
    return value


def _one_line(value: Any) -> str:
    text = str(value)
    for ch in _LINE_BREAKS:
        text = text.replace(ch, " ")
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def _escape_char(ch: str) -> str:
    return ascii(ch)[1:-1]


def py_comment(value: Any) -> str:
    """Text for after a ``#`` in Python: one line, no character that ends the comment."""
    return _one_line(value)


def sh_comment(value: Any) -> str:
    """Text for after a ``#`` in a shell script: one line."""
    return _one_line(value)


def yaml_comment(value: Any) -> str:
    """Text for after a ``#`` in YAML (which also breaks lines at U+0085/U+2028/U+2029): one line."""
    return _one_line(value)


def py_doc(value: Any) -> str:
    """Text placed inside a triple-quoted (non-raw) docstring, made inert.

    Backslashes and double quotes are escaped (so neither ``\"\"\"`` nor a trailing quote can close the
    string) and every non-printable character (newlines, U+2028, NUL, surrogates) becomes an escape.
    """
    out = []
    for ch in str(value):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(_escape_char(ch))
    return "".join(out)


def sh(value: Any) -> str:
    """One shell word (``shlex.quote``): no expansion, substitution or word splitting."""
    text = str(value)
    if "\x00" in text:
        raise LiteralError("a shell argument cannot contain NUL")
    return shlex.quote(text)


def yaml(value: Any) -> str:
    """A YAML flow scalar / collection that safe_load reads back as ``value`` (non-ASCII escaped)."""
    import yaml as _yaml

    if isinstance(value, float) and not math.isfinite(value):
        raise LiteralError("no YAML value for a non-finite number")
    if isinstance(value, PurePath):
        value = str(value)
    text = _yaml.safe_dump(value, default_flow_style=True, width=1 << 20, allow_unicode=False).strip()
    if text.endswith("\n..."):
        text = text[:-4].rstrip()
    elif text.endswith("..."):
        text = text[:-3].rstrip()
    if "\n" in text:  # a long or multi-line value: re-emit as one double-quoted scalar
        text = _json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text


def json(value: Any, indent: int | None = 2) -> str:
    """JSON text (ASCII only, so U+2028 and lone surrogates are escaped; NaN/Infinity refused)."""
    try:
        return _json.dumps(value, indent=indent, ensure_ascii=True, allow_nan=False)
    except ValueError as exc:
        raise LiteralError(str(exc)) from None


def md(value: Any) -> str:
    """Markdown-inert text: one line; HTML, links/images, tables, emphasis and math escaped.

    Backticks are left alone: a code span only makes text more literal. An underscore inside a word
    never emphasises (GFM), so only one at a word boundary is escaped.
    """
    text = _one_line(value)
    out = []
    for i, ch in enumerate(text):
        if ch in "<>&":
            out.append({"<": "&lt;", ">": "&gt;", "&": "&amp;"}[ch])
        elif ch == "_":
            inside = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
            out.append("_" if inside else "\\_")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def md_code(value: Any) -> str:
    """An inline code span holding ``value`` verbatim on one line (fence longer than any backtick run)."""
    text = _one_line(value).replace("|", "\\|")  # GFM splits table cells at a pipe even inside a code span
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ------------------------------------------------------------------------------------------ display --
# What a person reads must be what a reward reads. A terminal acts on control characters (ESC sequences erase
# a line, move the cursor, conceal text; a lone CR returns to the line start), a browser and an editor
# reorder text around bidi controls, and zero-width characters are not seen at all. `visible` writes each such
# character as a mark, ⟦NAME⟧ or ⟦U+XXXX⟧, and the marks' own brackets are marked too, so a mark on a sheet is
# always one of ours. Newlines and tabs stay as they are (they lay text out and hide nothing).
MARK_OPEN, MARK_CLOSE = "\u27e6", "\u27e7"
_C0 = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC "
       "FS GS RS US").split()
_NAMED = {**{chr(i): name for i, name in enumerate(_C0)}, "\x7f": "DEL", "\x85": "NEL", "\x9b": "CSI",
          "\xa0": "NBSP", "\xad": "SHY", "\u061c": "ALM", "\u180e": "MVS", "\u200b": "ZWSP", "\u200c": "ZWNJ",
          "\u200d": "ZWJ", "\u200e": "LRM", "\u200f": "RLM", "\u2028": "LS", "\u2029": "PS", "\u202a": "LRE",
          "\u202b": "RLE", "\u202c": "PDF", "\u202d": "LRO", "\u202e": "RLO", "\u2060": "WJ", "\u2066": "LRI",
          "\u2067": "RLI", "\u2068": "FSI", "\u2069": "PDI", "\ufeff": "BOM"}
# Categories drawn as nothing or acted on: controls, format characters (bidi, zero-width, tags), surrogates,
# private use, unassigned, line/paragraph separators, and spaces other than U+0020.
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}
# Letters and marks that draw nothing: Hangul fillers, the combining grapheme joiner, variation selectors.
_BLANK = set("\u115f\u1160\u3164\uffa0\u034f\u2800") | {chr(c) for c in range(0xFE00, 0xFE10)} | {
    chr(c) for c in range(0xE0100, 0xE01F0)}


_NOT_PLAIN = re.compile(r"[^\n\t -~]")  # the only characters that can need a mark


def _hidden(ch: str) -> bool:
    if ch in "\n\t " or ("!" <= ch <= "~"):
        return False
    return ch in _BLANK or ch in (MARK_OPEN, MARK_CLOSE) or unicodedata.category(ch) in _HIDDEN_CATEGORIES


def _mark(match: re.Match[str]) -> str:
    ch = match.group(0)
    return f"{MARK_OPEN}{mark_name(ch)}{MARK_CLOSE}" if _hidden(ch) else ch


def mark_name(ch: str) -> str:
    """The name a mark shows for one character: ESC, CR, RLO, ZWJ, ... or U+XXXX."""
    return _NAMED.get(ch) or f"U+{ord(ch):04X}"


def visible(value: Any) -> str:
    """``value`` as text a person can trust: every control, bidi, zero-width, invisible or look-alike-space
    character written as a mark (``⟦ESC⟧[2K``, ``⟦CR⟧``, ``⟦RLO⟧``, ``⟦ZWJ⟧``, ``⟦U+E0041⟧``), everything else
    as it is (linear in the length).

    >>> visible("<answer>000</answer>\\x1b[2K\\r<answer>741</answer>")
    '<answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>'
    """
    return _NOT_PLAIN.sub(_mark, str(value))


def hidden_characters(value: Any) -> dict[str, int]:
    """Mark name -> count of the characters :func:`visible` marks in ``value`` (empty when none)."""
    counts: dict[str, int] = {}
    for match in _NOT_PLAIN.finditer(str(value)):
        if _hidden(match.group(0)):
            name = mark_name(match.group(0))
            counts[name] = counts.get(name, 0) + 1
    return counts


def marks_note(*values: Any) -> str | None:
    """One sentence naming the characters marked in ``values`` ('3 characters shown as ⟦…⟧ marks: ESC ×2,
    CR'), or None when there are none."""
    counts: dict[str, int] = {}
    for value in values:
        for name, n in hidden_characters(value).items():
            counts[name] = counts.get(name, 0) + n
    if not counts:
        return None
    total = sum(counts.values())
    names = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"{total} character{'s' if total > 1 else ''} written as {MARK_OPEN}…{MARK_CLOSE} marks (controls, "
            f"invisible or direction-changing characters a terminal or browser would act on or hide): {names}")


FILTERS = {"py": py, "py_ident": py_ident, "py_module": py_module, "py_comment": py_comment, "py_doc": py_doc, "sh": sh,
           "sh_comment": sh_comment, "yaml": yaml, "yaml_comment": yaml_comment, "json": json, "md": md,
           "md_code": md_code}


def register(env: Any) -> Any:
    """Install every escaping filter in a Jinja environment (returned for chaining)."""
    env.filters.update(FILTERS)
    return env


def environment(folder: Path) -> jinja2.Environment:
    """The project's Jinja environment for the templates in ``folder`` (as config/BRIEF.md.j2 renders):
    strict (an unknown name is an error), block tags leave no blank lines, the trailing newline is kept,
    and every escaping filter is registered."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    register(env)
    return env


def check_text(value: Any, where: str = "") -> list[str]:
    """Locations (``where`` + key path) of strings in ``value`` that cannot be encoded as UTF-8.

    A lone surrogate (YAML's ``"\\ud800"``) is a valid Python str that no file can hold; the spec
    loader refuses it with one line instead of failing on the first write.
    """
    found: list[str] = []
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            found.append(where or "(value)")
    elif isinstance(value, dict):
        for k, v in value.items():
            shown = ascii(k)[1:-1] if isinstance(k, str) else str(k)  # the key itself may be the bad string
            here = f"{where}.{shown}" if where else shown
            found += check_text(k, here) + check_text(v, here)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found += check_text(v, f"{where}[{i}]")
    return found
