"""`finetune diagnose RUN [--apply]`: Phase 4 — read the training logs, name the symptoms, recommend one
variant change, and with --apply set it in the spec and re-render config/ (finetune.diagnose)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from finetune.diagnose.apply import apply_variant
from finetune.diagnose.diagnosis import diagnose_and_write
from finetune.diagnose.report import terminal_lines
from finetune.diagnose.trackiodb import NOT_A_LICENCE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN",
                        help="TRL output dir (or a run dir with train/), trainer_state.json, JSONL of logged dicts, or "
                             "a Trackio project's database (<project>.db: reported, never a licence)")
    parser.add_argument("-o", "--out", metavar="DIR",
                        help="write DIR/diagnosis/ (default: the run directory)")
    parser.add_argument("--spec", metavar="SPEC", help="the run spec (default: spec.yaml in the run directory)")
    parser.add_argument("--model", metavar="MODEL", help="hub id, model folder or config.json (default: from the "
                        "config or spec); a hub id's config.json comes from the HF cache or the hub")
    parser.add_argument("--correctness", metavar="NAME", action="append",
                        help="name of a correctness reward (rewards/NAME/mean) when no spec or REWARD_META says so")
    parser.add_argument("--trackio-run", metavar="NAME",
                        help="with a Trackio database: the run to read (default: the project's newest)")
    parser.add_argument("--apply", action="store_true",
                        help="set the recommended variant in the spec (original kept) and re-render config/")
    parser.add_argument("--no-gate", action="store_true",
                        help="with --apply, FOR TESTS ONLY: render without a Phase 1 gate record")
    parser.add_argument("--approve", action="store_true",
                        help="the person approves what this diagnosis licenses though it did not read this run's own "
                             "training (signed with the person's key; the plugin's hook refuses it to an agent)")
    parser.add_argument("--user", help="with --approve: the person (default: this login's name)")
    parser.add_argument("--yes", action="store_true", help="with --approve: record it without asking (after reading "
                                                           "what it licenses)")


def _approver(args: argparse.Namespace) -> Callable[[dict[str, Any]], str] | None:
    """With --approve: show the person what they would license, and return their name once they say yes."""
    if not args.approve:
        return None
    import getpass

    from finetune.cli.inspect import person_approves

    def ask(doc: dict[str, Any]) -> str:
        found = (doc.get("run") or {}).get("provenance") or {}
        change = doc.get("recommended_change") or {}
        lines = [f"to approve: the diagnosis '{doc.get('verdict')}' of {found.get('log')} licenses "
                 + (f"the change {change.get('kind')} → {change.get('variant') or change.get('kwargs')}"
                    if change else "moving lr / beta away from the base recipe" if doc.get("verdict") == "healthy"
                    else "nothing"),
                 "the log is " + ("this run's own training log" if found.get("own_training") else
                                  "NOT this run's own training (a file anyone could have written)")]
        person_approves(lines, args.yes, "this approval")
        return (args.user or "").strip() or getpass.getuser()

    return ask


def run(args: argparse.Namespace) -> int:
    doc, target, ctx = diagnose_and_write(args.run, out=args.out, spec=args.spec, model=args.model,
                                          correctness=args.correctness, for_apply=args.apply,
                                          trackio_run=args.trackio_run, approve=_approver(args))
    print("\n".join(terminal_lines(doc)))
    licence = doc.get("licence") or {}
    print(("licenses a config change: " if licence.get("holds") else "licenses no config change: ")
          + str(licence.get("why")))
    print(f"wrote {target}/ (diagnosis.json, report.md, curves.png)")
    if args.apply and doc["run"].get("licenses") is False and not licence.get("holds"):
        print(f"nothing applied: {doc['run']['log']} is {NOT_A_LICENCE}")
        return 0
    if args.apply:
        result = apply_variant(ctx, doc, no_gate=args.no_gate)
        if result["applied"]:
            print(f"applied: variant {result['variant']} in {result['spec']} (original kept as "
                  f"{result['original_kept']}); re-rendered {result['config_dir']}")
        else:
            print(f"nothing applied: {result['why']}")
    return 0
