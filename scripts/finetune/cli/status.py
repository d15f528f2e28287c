"""`finetune status RUN`: where a run directory stands, and the phase /finetune resumes at (finetune.status)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from finetune.status import machine, run_status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="run directory (holds spec.yaml and what the phases wrote)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    states, resume = run_status(args.run)
    if args.json:
        print(json.dumps({"run": str(args.run), "machine": machine(), "steps": [asdict(s) for s in states],
                          "resume": asdict(resume) if resume else None}, indent=2))
        return 0
    print(f"machine: {machine()}")
    for s in states:
        print(f"{s.phase}  {s.step:<26} {s.state:<8} {s.detail}")
    if resume is None:
        print("resume: nothing to do - every phase is done and current")
    else:
        print(f"resume: {resume.phase} - {resume.step} ({resume.state})")
    return 0
