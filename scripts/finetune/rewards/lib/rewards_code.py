"""Which code in a completion is "the answer", read the way a code reviewer reads — copied verbatim beside
rewards.py as ``rewards_code.py`` (standalone, stdlib only; the gate binds its sha256 like rewards.py).

The rules (each one has a reason id in ``REASONS``; the reward reference documents them):

* Reasoning is never the answer: the text after the last ``</think>`` is read; a ``<think>`` that is never
  closed (the completion stopped at the cap while thinking) has no answer (``unclosed_think``).
* Code is every fenced ``python`` / ``py`` / ``python3`` block, and every untagged block that parses as
  Python and is not an output listing (a block of bare literals, or one under an ``Output:`` /
  ``Input:`` label). With no fence at all, the code is the whole text when it parses, else the longest
  parseable run starting at the first ``def`` / ``class`` / ``import`` line (or first statement).
* The answer's program is those blocks in order, so a later block that redefines the entry point replaces
  the draft (draft → fix), and helpers from other blocks stay available. ``code_blocks: final`` reads only
  the last block that defines the entry point instead.
* Usage is not the answer: from a block's first top-level ``assert``, statement that calls or names the
  entry point (``print(f(3))``, ``result = f(3)``) or ``if __name__ == "__main__":`` driver on, only its
  definitions and imports are kept for function tasks (assert / function_call), so an "Example usage"
  block neither helps nor hurts.
  Doctest blocks (``>>> f(3)``) are usage. For stdin/stdout tasks the program is the last block that reads
  stdin (else the last block), driver included.
* A block cut off by the completion cap (an unclosed fence that no longer parses) that would hold the
  answer means there is no answer (``truncated_code``).
"""

from __future__ import annotations

import ast
import builtins
import re

# reason id -> what it means (the gate groups disagreements by these ids)
REASONS = {
    "no_code": "no Python code in the answer (reasoning, prose or output listings only)",
    "unclosed_think": "the completion stops inside <think>: code in reasoning is never the answer",
    "truncated_code": "the block holding the answer is cut off (an unclosed fence that does not parse)",
    "no_entry_point": "no code block defines the function the tests call (wrong or missing name)",
    "load_failed": "the answer's code does not load (syntax error, missing module, exception at import)",
    "tests_failed": "the code ran and some tests failed",
    "exited_early": "the code exited before its tests finished",
    "crashed": "the program crashed (non-zero exit, signal)",
    "output_limit": "the code wrote more output than the sandbox allows",
    "unusable_tests": "the row's tests cannot be used (not applicable)",
}

_PY_LANGS = {"python", "py", "python3", "py3", "python2", ""}
# An opening fence ends its line (``<answer>```python`` opens one); a closing fence starts its line and is
# not followed by a language (``` ```</answer>`` closes one).
# a fence is tried from the first character of its run only (from inside a long run the same failing tail
# would be read again at every position: quadratic)
_OPEN = re.compile(r"((?<!`)`{3,}|(?<!~)~{3,})[ \t]*([A-Za-z0-9_+#.-]*)[ \t]*$")
_CLOSE = re.compile(r"^[ \t]*(`{3,}|~{3,})(?![A-Za-z0-9_+#.-])")
_OUTPUT_LABEL = re.compile(r"\b(output|outputs|prints?|printed|result|results|returns|expected|console|stdout|"
                           r"stdin|input|inputs)\b[^:\n]*:\s*(?:(?:\*\*|__)\s*)?$", re.I)
_LABEL_MAX = 300  # a label is the prose line before a fence; only its end ("... output:") is read
_DEF_START = re.compile(r"^(def |async def |class |import |from \S+ import |@)")
_STATEMENT_START = re.compile(r"^[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_]\w*)*\s*(=|\(|\+=)|^(for|while|if|print)\b")
_STDIN = re.compile(r"\binput\s*\(|sys\.stdin|open\(\s*0|fileinput")
_BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_UNFENCED_LINES = 400


def after_thinking(text: str) -> str | None:
    """The text after the last </think>; None when a <think> is never closed."""
    if "</think>" in text:
        return text[text.rfind("</think>") + len("</think>"):]
    if "<think>" in text:
        return None
    return text


def fenced_blocks(text: str) -> tuple[list[tuple[str, str, str]], tuple[str, str, str] | None]:
    """([(language, body, label)], unclosed) — every closed fenced block with the last non-empty line
    before it, and the block a fence opened but never closed (the completion ended inside it)."""
    blocks: list[tuple[str, str, str]] = []
    lines = text.split("\n")
    opened: tuple[str, str, str, int] | None = None  # (fence, language, label, first body line)
    last_prose = ""
    for index, line in enumerate(lines):
        if opened is None:
            match = _OPEN.search(line)
            if match and "`" not in line[:match.start()].replace("``", ""):
                opened = (match.group(1), match.group(2).lower(), last_prose or line[:match.start()], index + 1)
            elif line.strip():
                last_prose = line.strip()
            continue
        match = _CLOSE.match(line)
        if match and match.group(1)[0] == opened[0][0] and len(match.group(1)) >= len(opened[0]):
            blocks.append((opened[1], "\n".join(lines[opened[3]:index]), opened[2]))
            opened, last_prose = None, ""
    unclosed = (opened[1], "\n".join(lines[opened[3]:]), opened[2]) if opened else None
    return blocks, unclosed


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _is_listing(tree: ast.Module) -> bool:
    """A block of bare literals only (``[1, 2, 3]``, ``6``, ``'abc'``) is printed output, not code."""
    if not tree.body:
        return True
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return False
        try:
            ast.literal_eval(stmt.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
    return True


def _code_blocks(text: str) -> tuple[list[str], str | None]:
    """(the code blocks in order, the body of an unclosed code block that does not parse)."""
    blocks, unclosed = fenced_blocks(text)
    if not blocks and unclosed is None:
        unfenced = _unfenced(text)
        return ([unfenced] if unfenced else []), None
    out = []
    for language, body, label in blocks:
        if language not in _PY_LANGS or body.lstrip().startswith(">>>"):
            continue
        tree = _parse(body)
        if language == "" and (tree is None or _OUTPUT_LABEL.search(label[-_LABEL_MAX:])):
            continue
        if tree is not None and _is_listing(tree):
            continue
        out.append(body)
    cut = None
    if unclosed is not None and unclosed[0] in _PY_LANGS and not unclosed[1].lstrip().startswith(">>>"):
        if _parse(unclosed[1]) is not None:
            out.append(unclosed[1])
        else:
            cut = unclosed[1]
    return out, cut


def _unfenced(text: str) -> str | None:
    """The longest parseable run of lines from the first def/class/import line (no fence anywhere)."""
    if text.strip() and _parse(text) is not None and not _is_listing(_parse(text) or ast.Module([], [])):
        return text  # the whole completion is a program (a base model's bare code)
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _DEF_START.match(line)), None)
    if start is None:  # a script without definitions: from its first statement-looking line
        start = next((i for i, line in enumerate(lines) if _STATEMENT_START.match(line)), None)
    if start is None:
        return None
    end_max = min(len(lines), start + _MAX_UNFENCED_LINES)
    for end in range(end_max, start, -1):
        source = "\n".join(lines[start:end])
        if _parse(source) is not None:
            return source
    return None


def called_names(tests: object) -> set[str]:
    """Names the tests call that are not builtins: the entry points an assert test suite expects."""
    sources = [tests] if isinstance(tests, str) else [t for t in tests if isinstance(t, str)] \
        if isinstance(tests, (list, tuple)) else []
    names: set[str] = set()
    for source in sources:
        tree = _parse(source)
        if tree is None:
            continue
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
                    for a in (*n.posonlyargs, *n.args, *n.kwonlyargs)}  # HumanEval's check(candidate)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name not in _BUILTIN_NAMES and name not in defined:
                    names.add(name)
    return names


def _defines(tree: ast.Module, entries: set[str]) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in entries:
            return True
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in entries for t in stmt.targets):
            return True
    return False


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _definitions_only(body: str, tree: ast.Module, entries: set[str]) -> str:
    """The block without its usage: from the first top-level assert, statement naming an entry point or
    __main__ driver on, only definitions and imports stay (the demo after it reads what the demo did)."""
    lines = body.split("\n")
    drop: list[tuple[int, int]] = []
    in_usage = False
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        defines = isinstance(stmt, ast.Assign) and _defines(ast.Module(body=[stmt], type_ignores=[]), entries)
        in_usage = in_usage or isinstance(stmt, ast.Assert) or _is_main_guard(stmt) or bool(names & entries
                                                                                           and not defines)
        if in_usage:
            drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
    for first, last in reversed(drop):
        del lines[first - 1:last]  # top-level statements: removing whole lines keeps the rest valid
    return "\n".join(lines)


def _function_program(blocks: list[str], entries: set[str], final_only: bool) -> tuple[str | None, str]:
    parsed = [(body, _parse(body)) for body in blocks]
    defining = [i for i, (_, tree) in enumerate(parsed) if tree is not None and _defines(tree, entries)]
    # A draft that does not parse counts only when it is the last block defining the entry point.
    broken = [i for i, (body, tree) in enumerate(parsed) if tree is None and any(
        re.search(rf"^\s*(async\s+)?(def|class)\s+{re.escape(e)}\b", body, re.M) for e in entries)]
    if broken and (not defining or broken[-1] > defining[-1]):
        return blocks[broken[-1]], "load_failed"
    if final_only and defining:
        body, tree = parsed[defining[-1]]
        return _definitions_only(body, tree, entries) if tree else body, "ok"
    kept = [_definitions_only(body, tree, entries) for body, tree in parsed if tree is not None]
    program = "\n\n".join(k for k in kept if k.strip())
    if not program.strip():
        return None, "no_code"
    return program, "ok" if defining or not entries else "no_entry_point"


def answer_program(text: str, test_format: str, entries: set[str], code_blocks: str = "all",
                   extract: str = "fenced") -> tuple[str | None, str]:
    """(the answer's program or None, reason id) — see the module docstring for the rules."""
    if extract == "none":
        return (text if text.strip() else None), ("ok" if text.strip() else "no_code")
    reply = after_thinking(text)
    if reply is None:
        return None, "unclosed_think"
    if extract == "answer_tag":
        start, end = reply.rfind("<answer>"), reply.rfind("</answer>")
        if start < 0 or end < start:
            return None, "no_code"
        reply = reply[start + len("<answer>"):end]
    blocks, cut = _code_blocks(reply)
    if cut is not None:
        cut_answers = (test_format == "stdin_stdout" or not blocks or
                       any(re.search(rf"\b(def|class)\s+{re.escape(e)}\b", cut) for e in entries))
        if cut_answers:
            return None, "truncated_code"
    if not blocks:
        return None, "no_code"
    if test_format == "stdin_stdout":
        reading = [b for b in blocks if _STDIN.search(b)]
        return (reading or blocks)[-1], "ok"
    return _function_program(blocks, entries, code_blocks == "final")
