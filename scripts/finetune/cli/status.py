"""`finetune status RUN`: where a run directory stands, and the phase /finetune resumes at (finetune.status)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from finetune.status import Report, SetState, Stop, machine, one_line, report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", nargs="?",
                        help="run directory (holds spec.yaml and what the phases wrote); optional with --task")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--task", metavar="TEXT", help="a new run's task, as the user wrote it: propose a readable "
                                                       "run-directory name (model family and size, the task's key "
                                                       "words), e.g. runs/qwen2.5-1.5b-invoice-json")
    parser.add_argument("--model", help="with --task: the policy's hub id or path (default: a model the task names)")


def _pct(v: object) -> str:
    return f"{v:.0%}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _set_line(s: SetState) -> str:
    line = f"  {one_line(s.name, 100)}  gate {s.gate}: {s.detail}"
    if s.comparison is None:
        return line + f"\n    comparison: {s.comparison_detail}"
    rewards = s.comparison["rewards"]
    agree = ", ".join(f"{r['name']} {_pct(r['agreement_phase1'])} -> {_pct(r['agreement_checkpoint'])}"
                      for r in rewards)
    success = ", ".join(f"{r['name']} {_pct(r['success_rate_phase1'])} -> {_pct(r['success_rate_checkpoint'])}"
                        for r in rewards if r["role"] == "correctness") or "no correctness reward"
    line += (f"\n    Phase 1 -> checkpoint: agreement {agree}; success {success}; "
             f"{s.comparison['new_disagreements']} new disagreement(s) on "
             f"{s.comparison['new_disagreement_samples']} sample(s)")
    if s.comparison_state != "current":
        line += f"\n    comparison {s.comparison_state}: {s.comparison_detail}"
    return line


def _stop_lines(stop: Stop, resuming_here: bool) -> list[str]:
    what = stop.problem or (f"{stop.file}: rule {stop.rule}, step {stop.step if stop.step is not None else '?'}, "
                            f"reward {stop.reward or '?'}")
    lines = [f"stopped: {what}"]
    if resuming_here:
        lines += [f"  next {n}: {step}" for n, step in enumerate(stop.next, 1)]
    return lines


def _text(r: Report) -> list[str]:
    lines = ([r.ungated] if r.ungated else []) + [f"machine: {machine()}"]
    lines += [f"{s.phase}  {s.step:<26} {s.state:<8} {s.detail}" for s in r.steps]
    if r.stopped is not None:
        lines += _stop_lines(r.stopped, r.resume is not None and r.resume.state == "stopped")
    if r.checkpoints:
        lines.append("checkpoint sets (inspect/checkpoints/):")
        lines += [_set_line(s) for s in r.checkpoints]
    if r.resume is None:
        lines.append("resume: nothing to do - every phase is done and current")
    else:
        lines.append(f"resume: {r.resume.phase} - {r.resume.step} ({r.resume.state})")
    return lines


def _slug_line(args: argparse.Namespace) -> str | None:
    """``slug: NAME (runs/NAME)`` for --task, or None."""
    from finetune.errors import UserError
    from finetune.slug import propose

    if args.model is not None and args.task is None:
        raise UserError("--model names the policy of a --task", where="--model", fix="give --task TEXT with it")
    if args.task is None:
        return None
    if not args.task.strip():
        raise UserError("--task is empty", where="--task", fix="pass the task as the user described it")
    name = propose(args.task, args.model)
    return f"slug: {name} (proposed run directory: runs/{name})"


def run(args: argparse.Namespace) -> int:
    from finetune.errors import UserError

    slug = _slug_line(args)
    if args.run is None:
        if slug is None:
            raise UserError("no run directory", where="RUN", fix="pass RUN, or --task TEXT to propose a name")
        if args.json:
            print(json.dumps({"slug": slug.split()[1]}))
        else:
            print(slug)
        return 0
    r = report(args.run)
    if args.json:
        named = {"slug": slug.split()[1]} if slug else {}
        print(json.dumps({"run": str(args.run), **named, "ungated": r.ungated, "machine": machine(),
                          "steps": [asdict(s) for s in r.steps],
                          "resume": asdict(r.resume) if r.resume else None,
                          "stopped": asdict(r.stopped) if r.stopped else None,
                          "checkpoints": [asdict(s) for s in r.checkpoints]}, indent=2))
        return 0
    print("\n".join(([slug] if slug else []) + _text(r)))
    return 0
