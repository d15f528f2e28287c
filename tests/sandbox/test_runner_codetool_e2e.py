"""A code-interpreter environment end to end (examples/code-interpreter/env.py: a `python` tool calling
`rewards_sandbox.run_python`) on the tool-calling tiny model: `rewards render` copies the sandbox beside it,
`inspect sample`'s rollouts run the model's snippets in the sandbox, the gate replays them there and PASSes a
person's reading, the gated train.py trains with TRL's `environment_factory` (the model's calls executed in
the sandbox), and an edit of the rendered sandbox after the PASS voids the gate for config render and train.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from codetool_helpers import build_model, write_spec
from person_helpers import person_verdicts

from finetune.sandbox import runner_source
from finetune.sandbox.runner import detect_isolation

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not detect_isolation().at_least("namespaces"), reason="the tool sandbox's default minimum is the namespaces level")]
SUM_CALL = re.compile(r"print\((\d)\+(\d)\)")
TRAIN_ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                 OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")


@pytest.fixture(scope="module")
def code_model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("code-tool-model") / "model")


def _executed_sums(trajectory: list[dict]) -> list[tuple[str, str]]:
    """(what the tool returned, what `print(a+b)` prints) for each such call the model made."""
    out = []
    for turn, after in zip(trajectory, trajectory[1:]):
        for call in turn.get("tool_calls") or []:
            found = SUM_CALL.fullmatch(str(call["function"]["arguments"].get("code", "")))
            if found and after["role"] == "tool":
                out.append((after["content"], f"{int(found[1]) + int(found[2])}\n"))
    return out


def test_sample_runs_the_models_snippets_in_the_sandbox(cli, tmp_path, code_model):
    spec = write_spec(tmp_path / "run", code_model)
    run = spec.parent
    assert cli("rewards", "render", spec).code == 0
    assert (run / "rewards_sandbox.py").read_text() == runner_source()
    result = cli("inspect", "sample", spec)
    assert result.code == 0, result.err
    stored = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    executed = [pair for s in stored for pair in _executed_sums(s.get("trajectory") or [])]
    assert executed, [s["completion"] for s in stored]
    assert all(got == want for got, want in executed), executed  # the program's own output came back
    sandbox = sys.modules["rewards_sandbox"]  # the rendered copy rewards.py loaded, in this process
    assert sandbox.__file__ == str(run / "rewards_sandbox.py")
    pool = sandbox._TOOL_STATE["pool"]
    assert pool is not None and pool.isolation_level == "namespaces"


def _trajectory(code: str, output: str, final: str) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": code}}}]},
        {"role": "tool", "name": "python", "content": output}, {"role": "assistant", "content": final}]


def _pass_phase1(cli, spec: Path) -> dict:
    """Phase 1 on imported rollouts a person read: right programs, a wrong one, an attack (the gate's replay
    runs each in the sandbox), an answer with no call; no flag to acknowledge (the text-only checks are
    listed as not applicable to an environment reward); gate PASS."""
    run = spec.parent
    data = yaml.safe_load(spec.read_text())
    data["inspection"] = {"prompts": 16, "per_prompt": 4, "min_read": 50, "probe_prompts": 4}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    samples, verdicts = [], []
    for i, line in enumerate((run / "train.jsonl").read_text().splitlines()):
        row = json.loads(line)
        a, b = (int(x) for x in re.findall(r"\d", row["prompt"][0]["content"]))
        kinds = [("right", _trajectory(f"print({a}+{b})", f"{a + b}\n", str(a + b))),
                 ("right", _trajectory(f"x = {a}\ny = {b}\nprint(x + y)", f"{a + b}\n", str(a + b))),
                 ("wrong", _trajectory(f"print({a}+{b + 1})", f"{a + b + 1}\n", str(a + b + 1))),
                 ("attack", _trajectory(f"open('/etc/passwd', 'a').write('x')\nprint({a + b})", f"{a + b}\n",
                                        str(a + b))) if i % 2 else
                 ("no call", [{"role": "assistant", "content": str(a + b)}])]
        for k, (kind, completion) in enumerate(kinds):
            samples.append({"id": f"r{i}-{k}", "row": i, "prompt": row["prompt"], "completion": completion,
                            "answer": row["answer"]})
            verdicts.append({"id": f"r{i}-{k}", "accept": kind == "right", "correct": kind == "right",
                             "well_formed": True, "note": kind})
    (run / "import.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (run / "base.jsonl").write_text("".join(json.dumps({**s, "id": "base-" + s["id"]}) + "\n" for s in samples[:8]))
    assert cli("inspect", "sample", spec, "--import", run / "import.jsonl", "--import-base", run / "base.jsonl",
               "--base-temperature", "0.3").code == 0
    assert cli("inspect", "score", run).code == 0
    scored = {json.loads(line)["id"]: json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()}
    # the attack's replay ran in the sandbox: /etc/passwd was read-only there, so the program never printed
    assert scored["r1-3"]["rewards"]["solved"] == 0.0 and scored["r1-0"]["rewards"]["solved"] == 1.0
    (run / "reading.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    assert person_verdicts(cli, run, run / "reading.jsonl", "--user", "reader").code == 0
    report = json.loads((run / "score_report.json").read_text())
    assert report["flags"] == [], report["flags"]
    assert {n["check"] for n in report["not_applicable"]} == {"length_correlated", "gold_answer_fails", "format_blind"}
    assert cli("inspect", "gate", run).code == 0
    return json.loads((run / "gate.json").read_text())


def test_gated_training_executes_calls_in_the_sandbox_and_an_edited_sandbox_voids_the_gate(cli, tmp_path,
                                                                                          code_model):
    spec = write_spec(tmp_path / "run", code_model, n_rows=16)
    run = spec.parent
    assert cli("rewards", "render", spec).code == 0
    gate = _pass_phase1(cli, spec)
    assert gate["status"] == "PASS" and "rewards_sandbox.py" in gate["hashes"]
    assert cli("config", "render", spec).code == 0  # loads env.py (its tools' schemas) with rewards_sandbox
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "2"], cwd=run, env=TRAIN_ENV,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = json.loads(next(run.rglob("trainer_state.json")).read_text())["log_history"]
    assert max(e.get("tools/call_frequency", 0.0) for e in log) > 0, log
    import pandas as pd

    executed = [pair for path in sorted(run.glob("train/completions/*.parquet"))
                for completion in pd.read_parquet(path)["completion"]
                for pair in _executed_sums([{**m, "tool_calls": list(m["tool_calls"] or [])} for m in completion])]
    assert executed and all(got == want for got, want in executed), executed

    # The sandbox copy is bound like every reward file: an edit after the PASS stops both stages.
    sandbox = run / "rewards_sandbox.py"
    sandbox.write_text(sandbox.read_text().replace('_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"',
                                                   '_SAFE_PATH = "/usr/bin"'))
    assert cli("config", "render", spec).code != 0
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, env=TRAIN_ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "rewards_sandbox.py" in proc.stderr, proc.stderr[-2000:]
