"""`finetune route`: Phase 0 — the fine-tuning method a task needs, from five answers (finetune.route)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from finetune.route import QUESTIONS, ROUTE_FILE, SIGNAL_KINDS, answers_from, decide, record, render_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", metavar="FILE", help="YAML or JSON file with the answers (flags override it)")
    parser.add_argument("--verifiable", metavar="yes|no",
                        help="can an algorithm check pass/fail (tests, parser, schema, tool call, math key)?")
    parser.add_argument("--signal-kind", choices=SIGNAL_KINDS, help="what checks it")
    parser.add_argument("--demonstrations", metavar="yes|no", help="are there example outputs to imitate?")
    parser.add_argument("--preference-pairs", metavar="yes|no", help="are there chosen/rejected output pairs?")
    parser.add_argument("--human-judged", metavar="yes|no", help="is quality judged by people or a rubric?")
    parser.add_argument("--base-success", choices=("never", "sometimes", "always", "unknown"),
                        help="does the current model ever pass the check (many samples, low temperature)?")
    parser.add_argument("-o", "--out", metavar="DIR", help="run directory to write route.json into")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")


def run(args: argparse.Namespace) -> int:
    answers = answers_from(args.answers, {field: getattr(args, field, None) for field in QUESTIONS})
    decision = decide(answers)
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        record(decision, out_dir)
    if args.json:
        print(json.dumps(decision.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render_text(decision))
        if out_dir is not None:
            print(f"wrote {out_dir / ROUTE_FILE}")
    return 0
