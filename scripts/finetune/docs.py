"""`finetune docs [--check]` — regenerate (or check) every generated part of the plugin's Markdown.

One source of truth: a number or block of code that a Markdown file states is produced by a function in
the package. :data:`REGISTRY` lists each target (a whole file, or a region between
``<!-- generated:NAME:start -->`` and ``<!-- generated:NAME:end -->``) and its producer
(``"module:function"``, returning text). ``finetune docs`` writes the targets atomically;
``finetune docs --check`` writes nothing, prints each target that drifted and exits 1, so CI fails when a
code change is not reflected in the docs. A producer that cannot be imported is a failure, never a skip.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from finetune import atomic
from finetune.errors import CheckFailed, UserError


@dataclass(frozen=True)
class Target:
    """A generated part of a file: the whole file (``region`` None) or one marked region."""

    path: str  # relative to the plugin root
    producer: str  # "package.module:function"
    region: str | None = None

    def describe(self) -> str:
        return f"{self.path} (region '{self.region}')" if self.region else self.path


REGISTRY: tuple[Target, ...] = (
    Target("references/reward-functions.md", "finetune.docs:reward_reference"),
    Target("references/grpo-memory.md", "finetune.memory:reference_doc"),
    Target("references/run-spec.md", "finetune.spec:reference_doc"),
    Target("skills/grpo-rlvr-training/SKILL.md", "finetune.render:skill_recipe_block", region="grpo-recipe"),
    Target("skills/finetuning-method-selection/SKILL.md", "finetune.route:skill_table", region="routes"),
    Target("README.md", "finetune.docs:cli_table", region="cli"),
)


TOC_MIN_LINES = 100  # a reference longer than this opens with a table of contents (Anthropic's skill guidance)
TOC_REGION = "toc"


def reward_reference() -> str:
    """references/reward-functions.md: every reward type's rendered code, then the sample formats."""
    from finetune.inspect.sample_remote import reference_section
    from finetune.rewards.render import reference_doc

    return reference_doc().rstrip("\n") + "\n\n" + reference_section()


def toc(text: str) -> str:
    """A table of contents of a Markdown text's '## ' headings, linked by GitHub's anchors."""
    from finetune.lint import _outside_code

    lines, seen = [], {}
    for _, line in _outside_code(text):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(2).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        if len(m.group(1)) == 2 and m.group(2).strip() != "Contents":
            lines.append(f"- [{m.group(2).strip()}](#{slug if n == 0 else f'{slug}-{n}'})")
    return "## Contents\n\n" + "\n".join(lines) + "\n"


def with_toc(text: str) -> str:
    """``text`` with its generated table of contents (after the title) refreshed, or removed when short."""
    start, end = _markers(TOC_REGION)
    stripped = re.sub(r"\n?" + re.escape(start) + r".*?" + re.escape(end) + r"\n", "", text, flags=re.S)
    if len(stripped.splitlines()) <= TOC_MIN_LINES:
        return stripped
    title = re.search(r"^# .*\n", stripped, re.M)
    at = title.end() if title else 0
    block = f"\n{start}\n{toc(stripped).strip()}\n{end}\n"
    return stripped[:at] + block + stripped[at:]


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def cli_table() -> str:
    """The README's command table: every group and verb with its help, from the CLI's own parsers."""
    import argparse

    from finetune.cli import GROUPS, build_parser

    rows = ["| command | what it does |", "|---|---|"]
    for name, (_, help_) in GROUPS.items():
        try:
            parser = build_parser(name)
        except ImportError:  # not written yet: the row shows what `finetune --help` shows
            parser = build_parser()
        group_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        verbs = next((a for a in group_parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if verbs is None:
            rows.append(f"| `finetune {name}` | {_cell(help_)} |")
            continue
        helps = {c.dest: _cell(c.help or "") for c in verbs._choices_actions}
        rows += [f"| `finetune {name} {verb}` | {helps.get(verb) or help_} |" for verb in verbs.choices]
    return "\n".join(rows) + "\n"


class ProducerUnavailable(Exception):
    """The producer's module or function does not exist (yet)."""


def load_producer(spec: str) -> Callable[[], str]:
    module_name, _, func_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProducerUnavailable(f"module {module_name} is not importable ({exc})") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ProducerUnavailable(f"{module_name} has no function {func_name}()")
    return func


def _markers(region: str) -> tuple[str, str]:
    return f"<!-- generated:{region}:start -->", f"<!-- generated:{region}:end -->"


def splice(text: str, region: str, content: str, where: str) -> str:
    """``text`` with the region's content replaced; the markers stay on their own lines."""
    start, end = _markers(region)
    pattern = re.compile(re.escape(start) + r"\n?(.*?)" + re.escape(end), re.DOTALL)
    matches = list(pattern.finditer(text))
    if len(matches) != 1:
        found = "no" if not matches else f"{len(matches)}"
        raise UserError(f"{found} '{start}' ... '{end}' region(s); exactly one is needed", where=where,
                        fix="restore the two marker lines around the generated region")
    body = content.strip("\n") + "\n"
    m = matches[0]
    return text[:m.start()] + start + "\n" + body + end + text[m.end():]


def expected_text(current: str | None, target: Target, produce: Callable[[], str], where: str) -> str:
    """What the target file should contain once this target is regenerated (``current``: its text now)."""
    content = produce()
    if not isinstance(content, str):
        raise TypeError(f"{target.producer} returned {type(content).__name__}, not text")
    if target.region is None:
        content = content if content.endswith("\n") else content + "\n"
        return with_toc(content) if target.path.startswith("references/") else content
    if current is None:
        raise UserError(f"{target.path} does not exist, so its region '{target.region}' cannot be generated",
                        where=where, fix="restore the file with its marker lines")
    return splice(current, target.region, content, where)


@dataclass(frozen=True)
class Outcome:
    """What happened to one target: ok, written, drifted (with --check) or unavailable (producer missing)."""

    target: Target
    status: str  # "ok" | "written" | "drifted" | "unavailable" | "failed"
    detail: str = ""


def sync(root: Path, check: bool, registry: Iterable[Target] = REGISTRY) -> list[Outcome]:
    """Regenerate (or, with ``check``, compare) every target. Targets of one file are applied in order."""
    outcomes: list[Outcome] = []
    pending: dict[Path, str] = {}  # file → its new text so far (several regions may share one file)
    originals: dict[Path, str | None] = {}
    for target in registry:
        path = root / target.path
        if path not in originals:
            originals[path] = path.read_text(encoding="utf-8") if path.is_file() else None
        try:
            produce = load_producer(target.producer)
        except ProducerUnavailable as exc:
            outcomes.append(Outcome(target, "unavailable", str(exc)))
            continue
        before = pending.get(path, originals[path])
        try:
            new = expected_text(before, target, produce, str(path))
        except UserError:
            raise
        except Exception as exc:  # a producer bug: report it with the target, keep checking the others
            module, _, func = target.producer.partition(":")
            outcomes.append(Outcome(target, "failed", f"{type(exc).__name__}: {exc} (traceback: python -c "
                                    f"'import {module}; {module}.{func}()')"))
            continue
        pending[path] = new
        same = before == new
        outcomes.append(Outcome(target, "ok" if same else ("drifted" if check else "written")))
    for path in sorted((root / "references").glob("*.md")):  # every reference over 100 lines opens with a TOC
        if path not in originals:
            originals[path] = path.read_text(encoding="utf-8")
        before = pending.get(path, originals[path])
        new = with_toc(before)
        pending[path] = new
        target = Target(str(path.relative_to(root)), "finetune.docs:with_toc", region=TOC_REGION)
        outcomes.append(Outcome(target, "ok" if new == before else ("drifted" if check else "written")))
    if not check:
        for path, text in pending.items():
            if originals[path] != text:
                atomic.write_text(path, text)
    return outcomes


def default_root() -> Path:
    """The plugin root this package lives in (a source checkout), else the current folder."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / ".claude-plugin").is_dir() else Path.cwd()


def add_arguments(parser) -> None:
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any target drifted")
    parser.add_argument("--root", metavar="DIR", help="plugin root (default: the checkout this package is in)")


def run(args, registry: Iterable[Target] | None = None) -> int:
    root = Path(args.root) if args.root else default_root()
    if not root.is_dir():
        raise UserError(f"not a directory: {root}", where="--root", fix="pass the plugin folder")
    outcomes = sync(root, args.check, REGISTRY if registry is None else registry)
    for o in outcomes:
        if o.status == "unavailable":
            print(f"{o.target.describe()}: cannot generate: producer {o.target.producer} unavailable: {o.detail}")
        elif o.status == "failed":
            print(f"{o.target.describe()}: cannot generate: producer {o.target.producer} raised {o.detail}")
        elif o.status == "drifted":
            print(f"{o.target.describe()}: drifted from {o.target.producer}(); run `finetune docs`")
        elif o.status == "written":
            print(f"{o.target.describe()}: regenerated")
    bad = [o for o in outcomes if o.status in {"unavailable", "failed", "drifted"}]
    if bad:
        kinds = sorted({o.status for o in bad})
        raise CheckFailed(f"{len(bad)} generated target(s) {' / '.join(kinds)}")
    print(f"docs: {len(outcomes)} generated target(s) up to date")
    return 0
