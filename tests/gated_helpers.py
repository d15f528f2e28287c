"""A gated run directory on the tiny model for the tests of what follows a PASS (eval, publish): write_run's spec with
a held-out file of its own, a genuine Phase 1 PASS (render_fixtures.pass_phase1) and `config render`."""

from __future__ import annotations

import json
from pathlib import Path

from render_fixtures import pass_phase1, write_run

HELD = [{"prompt": f"What is {a} plus {b}? Answer in <answer></answer>.", "answer": str(a + b)}
        for a, b in [(2, 3), (4, 5), (6, 7), (1, 8), (3, 3)]]


class _Cli:
    """finetune.cli.main in-process, as pass_phase1 calls it (code only)."""

    def __call__(self, *args: object):
        from finetune.cli import main

        class Result:
            code = main([str(a) for a in args])

        return Result


def gated_run(run: Path, model: str, prompts: int = 4) -> Path:
    """RUN with a PASS gate and a rendered config/; its held-out split is data/heldout.jsonl's first ``prompts``."""
    from finetune.cli import main

    spec = write_run(run, model, dataset__heldout={"prompts": prompts, "path": "data/heldout.jsonl"})
    (run / "data" / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HELD))
    pass_phase1(_Cli(), spec)
    assert main(["config", "render", str(spec)]) == 0
    return run
