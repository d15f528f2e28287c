"""An environment file's own module (env.py's `from env_utils import matches`), copied as rewards_lib_env_utils.py,
is bound by the gate: a genuine Phase 1 PASS on rollouts a person read, then an edit of the copy (every episode
solved) voids the PASS for the gate check and for config render."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from person_helpers import person_verdicts

from finetune.demo import tools as demo_tools

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rewards"))
from test_render_env_modules import ENV, ENV_RULES, ENV_UTILS  # noqa: E402

FORGED = "def matches(a, b, calls):\n    return True\n"


def _episode(x: int, y: int) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}]},
        {"role": "tool", "name": "add", "content": str(x + y)}, {"role": "assistant", "content": str(x + y)}]


@pytest.mark.slow  # the scoring child and the gate's re-score: several interpreters
def test_an_edited_environment_module_voids_the_pass(cli, tmp_path, tiny_model_dir):
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    run = tmp_path / "run"
    (run / "envs").mkdir(parents=True)
    for name, text in (("env.py", ENV), ("env_utils.py", ENV_UTILS), ("env_rules.py", ENV_RULES)):
        (run / "envs" / name).write_text(text)
    rows = demo_tools.rows(16, seed=2)
    (run / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = run / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "envmods", "model": str(tiny_model_dir), "dataset": {"path": "train.jsonl", "prompt_column": "prompt"},
        "environment": {"file": "envs/env.py", "class": "Calculator"},
        "rewards": [{"name": "solved", "type": "environment"}],
        "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
        "inspection": {"prompts": 16, "per_prompt": 4, "min_read": 50, "probe_prompts": 4}}, sort_keys=False))
    assert cli("rewards", "render", spec).code == 0
    samples, verdicts = [], []
    for i, r in enumerate(rows):
        a, b = r["a"], r["b"]
        for k, (episode, right) in enumerate([(_episode(a, b), True), (_episode(b, a), True),
                                              (_episode(a, b + 1), False),
                                              ([{"role": "assistant", "content": str(a + b)}], False)]):
            samples.append({"id": f"r{i}-{k}", "row": i, "prompt": r["prompt"], "completion": episode,
                            "columns": {"a": a, "b": b, "expected_call": r["expected_call"]}})
            verdicts.append({"id": f"r{i}-{k}", "accept": right, "correct": right, "well_formed": True})
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (run / "base.jsonl").write_text("".join(json.dumps({**s, "id": "base-" + s["id"]}) + "\n" for s in samples[:8]))
    assert cli("inspect", "sample", spec, "--import", run / "samples.jsonl", "--import-base", run / "base.jsonl",
               "--base-temperature", "0.3").code == 0
    assert cli("inspect", "score", run).code == 0
    assert json.loads((run / "score_report.json").read_text())["flags"] == []
    (run / "reading.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    assert person_verdicts(cli, run, run / "reading.jsonl", "--user", "reader").code == 0
    result = cli("inspect", "gate", run)
    assert result.code == 0, result
    record = json.loads((run / "gate.json").read_text())
    assert {"rewards_lib_env_utils.py", "rewards_lib_env_rules.py", "rewards_env.py"} <= set(record["hashes"])

    (run / "rewards_lib_env_utils.py").write_text(FORGED)  # after the PASS: every episode solved
    check = verify_gate(run, load_spec(spec))
    assert not check.ok and "rewards_lib_env_utils.py" in check.reason
    assert cli("config", "render", spec).code == 1
