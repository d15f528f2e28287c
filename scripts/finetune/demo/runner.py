"""The machinery both demo tasks run on: phases recorded as they happen, the demo folder, the checker's reading.

:class:`Runner` runs the product's stages in-process (through :func:`finetune.cli.main`, output into
``logs/NN-name.log``) and the demo's own steps, records each as a :class:`Phase` in a :class:`DemoResult`,
and raises :class:`Stop` at the first that cannot go on. :func:`prepare_out` refuses a folder the demo did
not make; :func:`quiet_libraries` and :func:`progress_bar` keep the console the demo's own.

Who reads the samples (gate-record contract): on a terminal the user reads them (terminal review) unless they
hand the reading to the checker when asked; otherwise the demo's independent checker
(:mod:`finetune.demo.checker`, or the tool task's) reads them through :func:`checker_verdicts`, recorded as
reader ``agent`` with every note saying "independent checker (demo), not a person", and the demo records
the confirmation itself under the name :data:`CHECKER_USER`. The gate therefore PASSes on a reading no
person made; every output says so, and a real run needs the user's confirmation.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, jsonio, rundir
from finetune.errors import CheckFailed, UserError

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.spec import RunSpec

MARKER = "DEMO_RUN.json"
CHECKER_USER = "finetune demo (no person)"
CHECKER_STATEMENT = (
    "DEMO ONLY: no person read or confirmed these samples. The reader was the demo's independent checker "
    "(finetune/demo/checker.py: it reads the digits from the prompt, not from the reward code), recorded as "
    "reader 'agent'; `finetune demo` records this confirmation itself so the gate can be shown end to end. "
    "A real run needs the user's own reading or confirmation.")


@dataclass
class Phase:
    """One step of the demo as it happened."""

    name: str
    status: str = "pending"  # ok | failed (expected) | unavailable | error
    seconds: float = 0.0
    detail: str = ""
    log: str | None = None
    command: str | None = None
    exit_code: int | None = None


@dataclass
class DemoResult:
    """Everything the report shows; also written to DIR/demo.json."""

    out: Path
    reader: str
    phases: list[Phase] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)


# ----------------------------------------------------------------------------------------------
# running the product's stages


class Runner:
    """Runs the phases in order, records each one, and stops at the first that cannot go on."""

    def __init__(self, result: DemoResult, console: Console) -> None:
        self.result, self.console = result, console
        self.logs = result.out / "logs"

    def _announce(self, p: Phase) -> None:
        colour = {"ok": "green", "failed (expected)": "yellow", "unavailable": "magenta",
                  "error": "red"}.get(p.status, "white")
        self.console.print(f"[{colour}]{p.status:>17}[/{colour}]  {p.name} ({p.seconds:.1f} s)"
                           + (f" — {p.detail}" if p.detail else ""), highlight=False)

    def _shown(self, arg: str) -> str:
        """An argument as the report shows it: paths relative to the demo folder, long texts elided."""
        arg = str(arg).replace(str(self.result.out) + os.sep, "")
        return _shell_quote(arg if len(arg) <= 80 else arg[:60] + "…")

    def stage(self, name: str, argv: list[str], *, expect: int = 0, interactive: bool = False) -> Phase:
        """Run ``finetune <argv>`` in-process; its output goes to logs/NN-name.log (the terminal when interactive)."""
        from finetune.cli import GROUPS, main

        p = Phase(name, command="finetune " + " ".join(self._shown(a) for a in argv))
        self.result.phases.append(p)
        module = GROUPS.get(argv[0], ("?",))[0]
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        log = self.logs / f"{len(self.result.phases):02d}-{slug}.log"
        p.log = str(log.relative_to(self.result.out))
        started = time.perf_counter()
        buf = io.StringIO()
        try:
            if interactive:
                code = main(argv)
            else:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    code = main(argv)
        except ImportError as exc:  # a stage whose module has not landed: say so, never pretend
            p.status, p.detail = "unavailable", f"{module} cannot be imported ({exc})"
            code = None
        p.seconds = time.perf_counter() - started
        p.exit_code = code
        atomic.write_text(log, f"$ {p.command}\n{buf.getvalue()}" + (f"\n(exit {code})\n" if code is not None else ""))
        if code is not None:
            if code == expect:
                p.status = "ok" if expect == 0 else "failed (expected)"
                if expect:
                    said = [ln.strip() for ln in buf.getvalue().splitlines() if ln.strip()]
                    p.detail = (said[-1] if said else "").replace(str(self.result.out) + os.sep, "")
            else:
                p.status = "error"
                tail = [ln for ln in buf.getvalue().splitlines() if ln.strip()][-3:]
                p.detail = f"exit {code}, expected {expect}: " + " | ".join(tail)
        self._announce(p)
        if p.status in ("error", "unavailable"):
            raise Stop(p)
        return p

    def step(self, name: str, fn: Callable[[Phase], str | None]) -> Phase:
        """Run a demo-internal step (no CLI stage): fn returns a detail line."""
        p = Phase(name)
        self.result.phases.append(p)
        started = time.perf_counter()
        try:
            p.detail = fn(p) or ""
            p.status = "ok"
        except ImportError as exc:
            p.status, p.detail = "unavailable", f"cannot be imported ({exc})"
        except (CheckFailed, UserError) as exc:  # e.g. training refused because the gate no longer holds
            p.status, p.detail = "error", str(exc)
        p.seconds = time.perf_counter() - started
        self._announce(p)
        if p.status != "ok":
            raise Stop(p)
        return p


class Stop(Exception):
    """Raised by :class:`Runner` at the first phase that cannot go on; carries that phase."""

    def __init__(self, phase: Phase):
        super().__init__(phase.name)
        self.phase = phase


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence transformers / hub progress bars and warnings while the demo draws its own."""
    import warnings

    import datasets
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    hub_was_disabled = are_progress_bars_disabled()
    datasets_were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    verbosity = hf_logging.get_verbosity()
    disable_progress_bars()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
        if datasets_were_enabled:
            datasets.enable_progress_bars()
        if not hub_was_disabled:
            enable_progress_bars()


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(str(arg))


def prepare_out(out: Path) -> None:
    """Refuse a folder the demo did not make (never lose a user's files); clear an earlier demo's."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file", where="-o", fix="name a folder for the demo")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise UserError(f"{out} is not empty and was not made by `finetune demo`", where="-o",
                            fix="name a new or empty folder (the demo never overwrites other files)")
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(out / MARKER, {"made_by": "finetune demo",
                                     "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def progress_bar(console: Any) -> Any:
    """A transient progress bar on the demo's console (stage output goes to logs/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


# ----------------------------------------------------------------------------------------------
# the reader: the independent checker (non-interactive) or the user (terminal review)


# what a checker makes of one scored row and its review item: (accept, correct, well_formed, note)
CheckerReading = Callable[[dict[str, Any], dict[str, Any]], tuple[bool, bool, bool, str]]


def _digits_reading(row: dict[str, Any], item: dict[str, Any]) -> tuple[bool, bool, bool, str]:
    from finetune.demo import checker as demo_checker

    c = demo_checker.check(row["prompt"], row["completion"], item["gold"])
    return c.accept, c.correct, c.well_formed, c.note


def checker_verdicts(run_dir: Path, spec: RunSpec,
                     read: CheckerReading = _digits_reading) -> tuple[Path, dict[str, int]]:
    """The checker reads the review selection; returns (verdicts JSONL for `inspect verdict --file`, counts).
    ``read`` is the task's checker (the digits task's by default; the tool task passes its own)."""
    from finetune.demo import checker as demo_checker
    from finetune.inspect import review

    items, _ = review.review_items(run_dir, spec)
    scored = {row["id"]: row for _, row in jsonio.read_jsonl(run_dir / rundir.SCORED)}
    rows, counts = [], {"read": 0, "accept": 0, "reject": 0}
    for it in items:
        accept, correct, well_formed, note = read(scored[it["id"]], it)
        rows.append({"id": it["id"], "accept": accept, "correct": correct, "well_formed": well_formed,
                     "note": f"[{demo_checker.READER_LABEL}] {note}", "reader": "agent"})
        counts["read"] += 1
        counts["accept" if accept else "reject"] += 1
    path = jsonio.write_jsonl(run_dir / "checker_verdicts.jsonl", rows)
    return path, counts


def evaluate_stage(run: Runner, run_dir: Path, checkpoint: Path, seed: int, k: int,
                   label: str) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """`finetune eval` of a toy run's saved model on the run's held-out split (RUN/eval/<folder name>): eval.json and
    its samples by side ("before": the base model, "after": the checkpoint)."""
    from finetune import evaluate

    name = checkpoint.name
    run.stage(f"{label}: held-out before/after, seed {seed} (finetune eval)",
              ["eval", str(run_dir), "--checkpoint", str(checkpoint), "--name", name, "--k", str(k), "--seed",
               str(seed), "--backend", "transformers"])
    doc = evaluate.read(run_dir, name)
    rows = [r for _, r in jsonio.read_jsonl(run_dir / rundir.EVAL_DIR / name / evaluate.SAMPLES)]
    return doc, {side: [r for r in rows if r.get("side") == side] for side in ("before", "after")}


def interval_facts(doc: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The evaluation's paired change per measure: before, after, change, its interval and the sign test."""
    return {"name": doc["name"], "level": doc["results"]["accept"]["level"],
            "results": {k: {f: doc["results"][k][f] for f in ("before", "after", "change", "interval",
                                                                "p_sign_test", "prompts")}
                        for k in keys if k in doc["results"]}}
