"""train.py runs the gated reward code, nothing else.

The rendered train.py loads rewards.py and its helpers by path from the exact bytes it checked
against gate.json, so a `rewards/` package beside rewards.py (which `from rewards import ...` would
have picked) changes nothing; an edited rewards.py whose hash is rewritten in gate.json makes both
`config render` and train.py refuse. Uses the demo's PASS run (a real gate PASS) copied per test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent('''
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("train_under_test", sys.argv[1])
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.check_gate()
    rewards = train.load_gated_rewards()
    import rewards as imported  # what any later `import rewards` gets
    completions = ["<think>x</think><answer>definitely wrong</answer>"]
    scores = {f.__name__: f(prompts=["q"], completions=completions, answer=["4"]) for f in rewards.REWARD_FUNCS}
    print(json.dumps({"file": rewards.__file__, "same": imported is rewards, "scores": scores}))
''')

IMPOSTOR = textwrap.dedent('''
    def _one(prompts=None, completions=None, **kwargs):
        return [1.0] * len(completions)
    {defs}
    REWARD_FUNCS = [{names}]
    REWARD_WEIGHTS = {weights}
''')


@pytest.fixture
def gated_run(tmp_path, demo_run) -> Path:
    """A copy of the demo's PASS run directory with a freshly rendered config/ (gate required)."""
    from finetune.cli import main

    src = Path(demo_run.out)
    shutil.copytree(src / "pass", tmp_path / "pass", ignore=shutil.ignore_patterns("train*", "config"))
    for shared in ("model", "data"):
        (tmp_path / shared).symlink_to(src / shared)
    assert main(["config", "render", str(tmp_path / "pass" / "spec.yaml")]) == 0
    return tmp_path / "pass"


def _drive(run: Path) -> subprocess.CompletedProcess:
    (run.parent / "driver.py").write_text(DRIVER)
    # run from the run directory with it on PYTHONPATH: the setting in which `from rewards import` was fooled
    return subprocess.run([sys.executable, str(run.parent / "driver.py"), str(run / "config" / "train.py")],
                          cwd=run, env={"PYTHONPATH": str(run), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


def test_a_rewards_package_beside_rewards_py_changes_nothing(gated_run):
    train_py = (gated_run / "config" / "train.py").read_text()
    assert "from rewards import" not in train_py and "sys.path.insert" not in train_py
    assert "PYTHONPATH" not in (gated_run / "config" / "launch.sh").read_text()
    names = json.loads((gated_run / "gate.json").read_text())["hashes"]
    assert "rewards.py" in names
    from finetune.spec import load_spec

    spec = load_spec(gated_run / "spec.yaml")
    package = gated_run / "rewards"
    package.mkdir()
    (package / "__init__.py").write_text(IMPOSTOR.format(
        defs="\n".join(f"{r.name} = _one" for r in spec.rewards),
        names=", ".join(r.name for r in spec.rewards), weights=[r.weight for r in spec.rewards]))
    proc = _drive(gated_run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(out["file"]) == (gated_run / "rewards.py").resolve() and out["same"]
    correctness = [r.name for r in spec.rewards if r.effective_role == "correctness"]
    assert correctness and all(out["scores"][n] == [0.0] for n in correctness), out  # the impostor says 1.0


def test_an_edited_rewards_py_with_its_hash_rewritten_is_refused(gated_run, cli):
    rewards = gated_run / "rewards.py"
    rewards.write_text(rewards.read_text() + "\n# edited after the gate\n")
    gate = json.loads((gated_run / "gate.json").read_text())
    gate["hashes"]["rewards.py"] = hashlib.sha256(rewards.read_bytes()).hexdigest()
    (gated_run / "gate.json").write_text(json.dumps(gate))
    r = cli("config", "render", gated_run / "spec.yaml")
    assert r.code != 0 and "score report" in r.err + r.out, r
    proc = _drive(gated_run)
    assert proc.returncode != 0 and "refusing to train" in proc.stderr, proc.stderr[-2000:]


def test_a_replaced_rewards_py_is_refused_and_the_gated_one_runs_again(gated_run):
    rewards = gated_run / "rewards.py"
    original = rewards.read_bytes()
    rewards.write_text("REWARD_FUNCS = []\n")
    proc = _drive(gated_run)
    assert proc.returncode != 0 and "refusing to train" in proc.stderr
    rewards.write_bytes(original)
    assert _drive(gated_run).returncode == 0
