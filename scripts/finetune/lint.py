"""`finetune lint [PATH]` — CI lint of the plugin's Markdown: skills, commands, agents, references.

Checks (each finding is printed as ``path:line: message``; exit 1 when there is any, 0 when clean):

* Agent Skills rules for every ``skills/<name>/SKILL.md``: frontmatter is a YAML mapping with only the
  allowed keys; ``name`` equals the folder, ``[a-z0-9-]``, at most 64 characters, no leading, trailing or
  double '-'; ``description`` 1-1024 characters, no '<' or '>', written in the third person, saying what
  the skill does AND when to use it; body at most 500 lines.
* Command and agent frontmatter parses (agents need ``name`` and ``description``); a command's
  ``allowed-tools`` never grants unscoped ``Bash``.
* Every relative Markdown link and every ``${CLAUDE_PLUGIN_ROOT}/...`` path resolves to a file.
* Every ```python block compiles.
* No shipped document cites a file outside the plugin (a ``../`` path leaving it or naming nothing); a
  reference over 100 lines opens with its generated table of contents.
* Every `finetune <group> [<verb>] [--flags]` the Markdown tells the agent to run (inline code, shell
  blocks; also as ``"$FT" ...``) names a real group, verb and options of this package's CLI.
* Every keyword passed to GRPOConfig / SFTConfig / DPOConfig / LoraConfig / GRPOTrainer / SFTTrainer /
  DPOTrainer in any code block exists in the installed TRL / peft, so a TRL rename breaks CI rather than
  a user's run. TRL is imported only when some block calls one of them (importing it costs seconds).
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.cli import Shape

ALLOWED_SKILL_KEYS = frozenset({"name", "description", "license", "allowed-tools", "metadata", "compatibility"})
SKILL_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500
# "what" is the text before the trigger clause; "when" is the trigger clause itself.
WHEN_RE = re.compile(r"\bwhen(?:ever)?\b", re.IGNORECASE)
FIRST_OR_SECOND_PERSON_RE = re.compile(r"^\s*(?:I|I'm|I'll|we|you|your|my)\b", re.IGNORECASE)
# Folders that are never plugin content.
SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".pytest_cache", ".hypothesis",
                       "build", "dist", "runs", ".ruff_cache"})
PLUGIN_ROOT_RE = re.compile(r"\$\{CLAUDE_PLUGIN_ROOT\}(/[A-Za-z0-9_.\-/]*)")
# [text](target) and ![alt](target) (targets with spaces are not supported).
LINK_RE = re.compile(r"(?<!\\)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+.-]*)")
PYTHON_LANGS = frozenset({"python", "py", "python3"})


@dataclass(frozen=True)
class Finding:
    """One lint finding: a file, a 1-based line and what is wrong there."""

    path: Path
    line: int
    message: str

    def render(self, root: Path) -> str:
        try:
            shown = self.path.resolve().relative_to(root.resolve())
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.message}"


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its info-string language, text and the file line of its first text line."""

    lang: str
    text: str
    first_line: int


# ---------------------------------------------------------------- Markdown parsing helpers


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """Return (frontmatter YAML or None, body, 1-based file line where the body starts)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return None, text, 1
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:]), i + 2
    return None, text, 1


def code_blocks(text: str, first_line: int = 1) -> Iterator[CodeBlock]:
    """Yield the fenced code blocks of a Markdown text (``first_line`` = file line of ``text[0]``)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            j += 1
        indent = len(m.group(1))
        body = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[start:j]]
        yield CodeBlock(lang, "\n".join(body) + "\n", first_line + start)
        i = j + 1


def _outside_code(text: str) -> Iterator[tuple[int, str]]:
    """(0-based line index, line) of lines outside fenced code blocks."""
    fence: str | None = None
    for idx, line in enumerate(text.splitlines()):
        m = FENCE_RE.match(line)
        if fence is None and m:
            fence = m.group(2)[0] * len(m.group(2))
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield idx, line


def _strip_inline_code(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


# ---------------------------------------------------------------- installed TRL / peft signatures


@dataclass(frozen=True)
class KnownCallable:
    """A library class whose keyword arguments the lint checks, with where its field names come from."""

    library: str
    version: str
    fields: frozenset[str]
    accepts_var_kwargs: bool = False


def _dataclass_fields(cls: type) -> frozenset[str]:
    import dataclasses

    return frozenset(f.name for f in dataclasses.fields(cls) if f.init)


def _signature_params(obj: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    import inspect

    params = inspect.signature(obj).parameters.values()
    names = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


CHECKED_CALLABLES = ("GRPOConfig", "SFTConfig", "DPOConfig", "LoraConfig", "GRPOTrainer", "SFTTrainer", "DPOTrainer")


@cache
def known_callable(name: str) -> KnownCallable:
    """Fields of one checked class in the INSTALLED library (imported lazily: TRL pulls in torch)."""
    if name == "LoraConfig":
        import peft
        from peft import LoraConfig

        return KnownCallable("peft", peft.__version__, _dataclass_fields(LoraConfig))
    import trl

    if name.endswith("Config"):
        return KnownCallable("TRL", trl.__version__, _dataclass_fields(getattr(trl, name)))
    params, var_kw = _signature_params(getattr(trl, name).__init__)
    return KnownCallable("TRL", trl.__version__, params - {"self"}, var_kw)


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def kwarg_findings(tree: ast.AST, path: Path, first_line: int,
                   lookup: Callable[[str], KnownCallable] = known_callable) -> list[Finding]:
    """Keywords passed to a checked TRL/peft class that the installed version does not have."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node.func)
        if name not in CHECKED_CALLABLES:
            continue
        keywords = [kw for kw in node.keywords if kw.arg is not None]
        if not keywords:
            continue
        known = lookup(name)
        if known.accepts_var_kwargs:
            continue
        for kw in keywords:
            if kw.arg is None or kw.arg in known.fields:
                continue
            close = difflib.get_close_matches(kw.arg, sorted(known.fields), n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            out.append(Finding(path, first_line + kw.lineno - 1,
                               f"{name} has no field '{kw.arg}' in {known.library} {known.version}{hint}"))
    return out


# ---------------------------------------------------------------- the checks


def _load_frontmatter(path: Path, text: str, findings: list[Finding],
                      kind: str) -> tuple[dict[str, Any] | None, str, int]:
    raw, body, body_line = split_frontmatter(text)
    if raw is None:
        findings.append(Finding(path, 1, f"{kind} has no YAML frontmatter (a '---' block at the top)"))
        return None, body, body_line
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + mark.line if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        findings.append(Finding(path, line, f"{kind} frontmatter is not valid YAML: {problem}"))
        return None, body, body_line
    if not isinstance(data, dict):
        findings.append(Finding(path, 1, f"{kind} frontmatter must be a YAML mapping"))
        return None, body, body_line
    return data, body, body_line


def _key_line(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines()[:200], start=1):
        if line.startswith(f"{key}:"):
            return i
    return 1


def check_skill(path: Path, text: str) -> list[Finding]:
    """Agent Skills rules for one SKILL.md (its folder name is the skill's name)."""
    findings: list[Finding] = []
    data, body, _ = _load_frontmatter(path, text, findings, "SKILL.md")
    if data is None:
        return findings
    folder = path.parent.name
    for key in data:
        if key not in ALLOWED_SKILL_KEYS:
            findings.append(Finding(path, _key_line(text, str(key)), f"frontmatter key '{key}' is not allowed "
                                    f"(allowed: {', '.join(sorted(ALLOWED_SKILL_KEYS))})"))
    name = data.get("name")
    line = _key_line(text, "name")
    if not isinstance(name, str) or not name:
        findings.append(Finding(path, line, "frontmatter needs a 'name'"))
    else:
        if name != folder:
            findings.append(Finding(path, line, f"name '{name}' must equal the skill's folder name '{folder}'"))
        if len(name) > MAX_NAME:
            findings.append(Finding(path, line, f"name is {len(name)} characters; at most {MAX_NAME}"))
        if not SKILL_NAME_RE.match(name):
            findings.append(Finding(path, line, f"name '{name}' must be lowercase letters, digits and single "
                                    "'-' (no leading, trailing or double '-')"))
        if "anthropic" in name or "claude" in name:
            findings.append(Finding(path, line, f"name '{name}' must not contain 'anthropic' or 'claude'"))
    desc = data.get("description")
    line = _key_line(text, "description")
    if not isinstance(desc, str) or not desc.strip():
        findings.append(Finding(path, line, "frontmatter needs a non-empty 'description'"))
    else:
        if len(desc) > MAX_DESCRIPTION:
            findings.append(Finding(path, line, f"description is {len(desc)} characters; at most {MAX_DESCRIPTION}"))
        if "<" in desc or ">" in desc:
            findings.append(Finding(path, line, "description must not contain '<' or '>'"))
        when = WHEN_RE.search(desc)
        if not when:
            findings.append(Finding(path, line, "description must say WHEN to use the skill "
                                    "(e.g. 'Use when ...')"))
        elif len(desc[:when.start()].split()) < 3:
            findings.append(Finding(path, line, "description must say WHAT the skill does before saying when "
                                    "to use it"))
        if FIRST_OR_SECOND_PERSON_RE.match(desc):
            findings.append(Finding(path, line, "description must be written in the third person "
                                    "(e.g. 'Builds ...', not 'I build' / 'You can')"))
    compat = data.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or len(compat) > MAX_COMPATIBILITY):
        findings.append(Finding(path, _key_line(text, "compatibility"),
                                f"compatibility must be a string of at most {MAX_COMPATIBILITY} characters"))
    meta = data.get("metadata")
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                                 for k, v in meta.items())):
        findings.append(Finding(path, _key_line(text, "metadata"), "metadata must map strings to strings"))
    n_body = len(body.splitlines())
    if n_body > MAX_BODY_LINES:
        findings.append(Finding(path, 1, f"body is {n_body} lines; at most {MAX_BODY_LINES} "
                                "(move detail into references/)"))
    return findings


def check_command(path: Path, text: str) -> list[Finding]:
    """A slash command's frontmatter must parse; allowed-tools must be a string or a list of strings."""
    findings: list[Finding] = []
    data, _, _ = _load_frontmatter(path, text, findings, "command")
    if data is None:
        return findings
    if not isinstance(data.get("description"), str) or not data["description"].strip():
        findings.append(Finding(path, _key_line(text, "description"), "command needs a 'description'"))
    tools = data.get("allowed-tools")
    if tools is not None and not (isinstance(tools, str) or
                                  (isinstance(tools, list) and all(isinstance(t, str) for t in tools))):
        findings.append(Finding(path, _key_line(text, "allowed-tools"),
                                "allowed-tools must be a string or a list of strings"))
    elif tools is not None:
        rules = [tools] if isinstance(tools, str) else tools
        rules = [r.strip() for rule in rules for r in re.split(r",\s*(?![^()]*\))", rule) if r.strip()]
        calls = _command_calls(text)
        for rule in rules:
            line = _key_line(text, "allowed-tools")
            if re.fullmatch(r"Bash(?:\(\s*(?:\*|:\*)?\s*\))?", rule):
                findings.append(Finding(path, line, f"allowed-tools rule '{rule}' allows any shell command; scope "
                                        "it, e.g. Bash(${CLAUDE_PLUGIN_ROOT}/scripts/bootstrap.sh:*)"))
            elif re.fullmatch(r"Task(?:\(.*\))?", rule):
                findings.append(Finding(path, line, f"allowed-tools rule '{rule}': the subagent tool is 'Agent' "
                                        "in Claude Code 2.1.63 and later"))
            elif (m := re.fullmatch(r"Bash\((.*\$\{CLAUDE_PLUGIN_(?:ROOT|DATA)\}.*)\)", rule)) and calls and \
                    not any(bash_rule_covers(m.group(1), c) for c in calls):
                findings.append(Finding(path, line, f"allowed-tools rule '{rule}' matches no command the body runs "
                                        "(write the rule exactly as the calls are written, quotes included)"))
    return findings


def bash_rule_covers(specifier: str, call: str) -> bool:
    """Claude Code's matching of a Bash rule's specifier: 'PREFIX:*' / 'PREFIX *' by prefix, else exact."""
    if specifier.endswith(":*"):
        prefix = specifier[:-2]
        return call == prefix or call.startswith(prefix + " ")
    if specifier.endswith(" *"):
        return call == specifier[:-2] or call.startswith(specifier[:-1])
    return call == specifier


def _command_calls(text: str) -> list[str]:
    """Each command line of a Markdown text's shell blocks (comments and '# only if:' notes dropped)."""
    calls = []
    for block in code_blocks(text):
        if block.lang in ("bash", "sh", "shell"):
            calls += [ln.strip().partition(" # ")[0].strip() for ln in block.text.splitlines()
                      if ln.strip() and not ln.strip().startswith("#")]
    return calls


def check_agent(path: Path, text: str) -> list[Finding]:
    """A subagent's frontmatter must parse and carry a name (= file stem) and a description."""
    findings: list[Finding] = []
    data, _, _ = _load_frontmatter(path, text, findings, "agent")
    if data is None:
        return findings
    name = data.get("name")
    if not isinstance(name, str) or not name:
        findings.append(Finding(path, 1, "agent needs a 'name'"))
    elif name != path.stem:
        findings.append(Finding(path, _key_line(text, "name"), f"agent name '{name}' should equal the file name "
                                f"'{path.stem}'"))
    if not isinstance(data.get("description"), str) or not data["description"].strip():
        findings.append(Finding(path, _key_line(text, "description"), "agent needs a 'description'"))
    return findings


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a Markdown text's headings (lowercase, punctuation dropped, spaces to '-',
    repeats numbered -1, -2, ...)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _outside_code(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def check_links(path: Path, text: str, root: Path) -> list[Finding]:
    """Relative links (and their #anchors) and ${CLAUDE_PLUGIN_ROOT}/ paths must resolve."""
    findings: list[Finding] = []
    for idx, line in _outside_code(text):
        for m in LINK_RE.finditer(_strip_inline_code(line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # URL, mailto:
            if "${" in target:
                continue  # ${CLAUDE_PLUGIN_ROOT} paths are checked below
            file_part, _, anchor = target.split("?", 1)[0].partition("#")
            if file_part:
                resolved = (root / file_part.lstrip("/")) if file_part.startswith("/") else (path.parent / file_part)
            else:
                resolved = path
            if not resolved.exists():
                findings.append(Finding(path, idx + 1, f"broken link: '{target}' does not exist"))
                continue
            if anchor and resolved.is_file() and resolved.suffix == ".md":
                if anchor not in heading_anchors(resolved.read_text(encoding="utf-8")):
                    findings.append(Finding(path, idx + 1, f"broken link: '{target}' - "
                                            f"{'this file' if resolved == path else file_part} has no heading "
                                            f"'#{anchor}'"))
    # ${CLAUDE_PLUGIN_ROOT} paths are checked everywhere, code blocks and frontmatter included: they are what
    # the agent runs.
    for idx, line in enumerate(text.splitlines()):
        for m in PLUGIN_ROOT_RE.finditer(line):
            rel = m.group(1).rstrip(".").strip("/")
            if not rel:
                continue
            if not (root / rel).exists():
                findings.append(Finding(path, idx + 1, f"${{CLAUDE_PLUGIN_ROOT}}/{rel} does not exist in the plugin"))
    return findings


RELATIVE_PATH_RE = re.compile(r"(?<![\w./-])(?:\.\./)+[\w.-]+(?:/[\w.-]+)*")
TOC_MIN_LINES = 100


def check_shipped_citations(path: Path, text: str, root: Path) -> list[Finding]:
    """A shipped document must not cite a file outside the plugin: a ``../`` path that, from the document's
    folder, leaves the plugin or names nothing in it (the development checkout's sibling folders do not ship)."""
    inside = root.resolve()

    def outside(rel: str) -> bool:
        target = (path.parent.resolve() / rel).resolve()
        return not target.is_relative_to(inside) or not target.exists()

    return [Finding(path, idx + 1, f"cites '{m.group(0)}', which does not ship with the plugin; cite "
                    "references/sources.md (copy what the source says there)")
            for idx, line in enumerate(text.splitlines()) for m in RELATIVE_PATH_RE.finditer(line)
            if outside(m.group(0))]


def check_reference_toc(path: Path, text: str) -> list[Finding]:
    """A reference over 100 lines opens with its generated table of contents."""
    if len(text.splitlines()) <= TOC_MIN_LINES or "<!-- generated:toc:start -->" in "\n".join(text.splitlines()[:5]):
        return []
    return [Finding(path, 1, f"reference is {len(text.splitlines())} lines with no table of contents at the top; "
                    "run `finetune docs`")]


def check_code_blocks(path: Path, text: str,
                      lookup: Callable[[str], KnownCallable] = known_callable) -> list[Finding]:
    """Python blocks must compile; TRL/peft keywords in any parsable block must exist."""
    findings: list[Finding] = []
    for block in code_blocks(text):
        is_python = block.lang in PYTHON_LANGS
        try:
            tree = ast.parse(block.text, filename=str(path))
        except SyntaxError as exc:
            if is_python:
                line = block.first_line + (exc.lineno or 1) - 1
                findings.append(Finding(path, line, f"python block does not compile: {exc.msg}"))
            continue  # a non-Python block (shell, YAML) that happens not to parse is fine
        if is_python or any(f"{n}(" in block.text for n in CHECKED_CALLABLES):
            findings.extend(kwarg_findings(tree, path, block.first_line, lookup))
    return findings


# A command as the docs write it: `finetune ...`, `.../venv/bin/finetune ...` or `"$FT" ...` (FT holds its path).
CLI_CALL_RE = re.compile(r'^\s*(?:\$\s+)?(?:"?\$\{?FT\}?"?|"?(?:[^\s"`]*/)?finetune"?)[ \t]+([a-z][\w-]*)(.*)$')
CLI_OPTION_RE = re.compile(r"(?:(?<=[\s\[])|^)(--?[A-Za-z][\w-]*)")
SHELL_LANGS = frozenset({"", "bash", "sh", "shell", "console", "zsh"})


@cache
def _cli_shape(group: str) -> tuple[Shape | None, str | None]:
    """(the group's commands, or None) and an error text when the group's module cannot be loaded."""
    from finetune import cli

    if group not in cli.GROUPS:
        return None, f"'finetune {group}' is not a command group (groups: {', '.join(cli.GROUPS)})"
    try:
        return cli.shape(group), None
    except Exception as exc:  # the group's module is missing or broken: the command cannot run
        return None, (f"'finetune {group}' cannot run: its module {cli.GROUPS[group][0]} does not load "
                      f"({type(exc).__name__}: {exc})")


def cli_reference_problem(command_line: str) -> str | None:
    """What is wrong with one `finetune ...` command line as the docs write it, or None."""
    m = CLI_CALL_RE.match(command_line)
    if not m:
        return None
    group, rest = m.group(1), re.split(r"\\?\||;|&&|>|#", m.group(2), maxsplit=1)[0]
    command, error = _cli_shape(group)
    if command is None:
        return error
    shown = f"finetune {group}"
    verbs = command.verbs
    if verbs:
        first = rest.split()[0] if rest.split() else ""
        if not first or first.startswith(("...", "<", "[")) or first.isupper():
            return None  # the group named on its own, or a placeholder for its verb
        if first.startswith("-"):
            if re.search(r"(?:^|\s)(?:-h|--help)\b", rest):
                return None
            return f"'{shown}' needs a verb before its options (one of: {', '.join(verbs)})"
        if first not in verbs:
            return f"'{shown} {first}' is not a command (verbs: {', '.join(verbs)})"
        command, shown = verbs[first], f"{shown} {first}"
    known = set(command.options)
    for option in CLI_OPTION_RE.findall(rest):
        if option not in known:
            close = difflib.get_close_matches(option, sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            return f"'{shown}' has no option '{option}'{hint}"
    return None


def check_cli_references(path: Path, text: str) -> list[Finding]:
    """Commands in inline code and shell blocks must exist in this package's CLI."""
    findings: list[Finding] = []
    for idx, line in _outside_code(text):
        for span in re.findall(r"`([^`]+)`", line):
            problem = cli_reference_problem(span)
            if problem:
                findings.append(Finding(path, idx + 1, problem))
    for block in code_blocks(text):
        if block.lang not in SHELL_LANGS:
            continue
        for offset, line in enumerate(block.text.splitlines()):
            problem = cli_reference_problem(line)
            if problem:
                findings.append(Finding(path, block.first_line + offset, problem))
    return findings


PLUGIN_CONTENT_DIRS = ("skills", "commands", "agents", "references")


def markdown_files(target: Path) -> list[Path]:
    """The Markdown files to lint under ``target``.

    At a plugin root: the top-level *.md files and everything under skills/, commands/, agents/ and
    references/ (not tests' fixtures or build outputs). Anywhere else: every *.md below ``target``.
    """
    if target.is_file():
        return [target]
    if (target / ".claude-plugin").is_dir():
        found = sorted(p for p in target.glob("*.md") if p.is_file())
        for name in PLUGIN_CONTENT_DIRS:
            if (target / name).is_dir():
                found += markdown_files(target / name)
        return found
    out = []
    for p in sorted(target.rglob("*.md")):
        if any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(target).parts[:-1]):
            continue
        out.append(p)
    return out


def find_plugin_root(start: Path) -> Path:
    """The folder holding .claude-plugin/ at or above ``start`` (``start`` itself if there is none)."""
    start = start.resolve()
    for cand in [start if start.is_dir() else start.parent, *start.parents]:
        if (cand / ".claude-plugin").is_dir():
            return cand
    return start if start.is_dir() else start.parent


def lint_file(path: Path, root: Path, lookup: Callable[[str], KnownCallable] = known_callable) -> list[Finding]:
    """All checks that apply to one Markdown file, by where it sits in the plugin."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return [Finding(path, 1, f"not UTF-8 text ({exc.reason})")]
    rel = path.resolve().relative_to(root.resolve()).parts if path.resolve().is_relative_to(root.resolve()) else ()
    findings: list[Finding] = []
    if path.name == "SKILL.md" and len(rel) >= 2 and rel[-3:-2] == ("skills",):
        findings += check_skill(path, text)
    elif len(rel) == 2 and rel[0] == "commands":
        findings += check_command(path, text)
    elif len(rel) == 2 and rel[0] == "agents":
        findings += check_agent(path, text)
    findings += check_links(path, text, root)
    if (rel[:1] and rel[0] in PLUGIN_CONTENT_DIRS) or rel == ("README.md",):  # what a user's Claude Code reads
        findings += check_shipped_citations(path, text, root)
    if len(rel) == 2 and rel[0] == "references":
        findings += check_reference_toc(path, text)
    findings += check_code_blocks(path, text, lookup)
    findings += check_cli_references(path, text)
    return findings


def lint(target: Path, lookup: Callable[[str], KnownCallable] = known_callable) -> list[Finding]:
    """Lint every Markdown file under ``target`` (a plugin root, a folder in it, or one file)."""
    if not target.exists():
        raise UserError(f"no such file or directory: {target}", fix="pass the plugin folder (default '.')")
    root = find_plugin_root(target)
    findings: list[Finding] = []
    for path in markdown_files(target):
        findings += lint_file(path, root, lookup)
    skills_dir = root / "skills"
    if target.resolve() == root and skills_dir.is_dir():
        for d in sorted(p for p in skills_dir.iterdir() if p.is_dir()):
            if not (d / "SKILL.md").is_file():
                findings.append(Finding(d, 1, "skill folder has no SKILL.md"))
    return sorted(set(findings), key=lambda f: (str(f.path), f.line, f.message))


def render_findings(findings: Iterable[Finding], root: Path) -> list[str]:
    return [f.render(root) for f in findings]
