"""type: python — the user's own verifier, copied beside rewards.py and wrapped in the common guard."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python-reward"

USER = '''
import time

def check(completion, prompt="", expected=None, **_):
    if completion == "raise":
        raise RuntimeError("boom")
    if completion == "slow":
        time.sleep(5)
    if completion == "big":
        return 7
    if completion == "text":
        return "yes"
    if expected is None:
        return None
    return completion.strip() == expected
'''


def _spec(folder: Path, extra: str = "") -> Path:
    (folder / "checker.py").write_text(USER)
    spec = folder / "spec.yaml"
    spec.write_text("name: py\nmodel: m\ndataset: {path: d.jsonl}\nrewards:\n"
                    f"  - {{name: mine, type: python, file: checker.py, function: check, columns: [expected], "
                    f"timeout_s: 1.0{extra}}}\n")
    return spec


def _import(folder: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_py_rewards_{id(folder)}", folder / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_user_file_is_copied_and_guarded(cli, tmp_path):
    spec = _spec(tmp_path)
    assert cli("rewards", "render", spec).code == 0
    assert (tmp_path / "rewards_user_mine.py").read_text() == USER  # verbatim: the gate binds this file
    mod = _import(tmp_path)
    logged = []
    out = mod.mine(prompts=["Q"] * 7, completions=["42", "41", "raise", "slow", "big", "text", "42"],
                   expected=["42", "42", "42", "42", "42", "42", None], log_metric=lambda k, v: logged.append((k, v)))
    assert out == [1.0, 0.0, None, None, None, None, None]
    assert logged == [("rewards/mine/errors", 4.0)]
    assert mod.REWARD_META[0].type == "python" and mod.REWARD_META[0].role == "correctness"


@pytest.mark.parametrize("entry, field", [
    ("file: missing.py, function: check", "rewards[0].file"),
    ("file: checker.py, function: nope", "rewards[0].function"),
])
def test_bad_user_reward_is_refused(cli, tmp_path, entry, field):
    (tmp_path / "checker.py").write_text(USER)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: py\nmodel: m\ndataset: {{path: d.jsonl}}\nrewards:\n  - {{name: mine, type: python, {entry}}}\n")
    result = cli("rewards", "render", spec, "-o", tmp_path / "out")
    assert result.code == 2 and field in result.err and "\n" not in result.err.strip()
    assert not (tmp_path / "out").exists()


def test_worked_example_sql_checker(cli, tmp_path):
    run = tmp_path / "sql"
    shutil.copytree(EXAMPLE, run)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    mod = _import(run)
    rows = [json.loads(line) for line in (run / "data.jsonl").read_text().splitlines()]
    right = ["```sql\nSELECT name FROM emp WHERE dept = 'eng'\n```", "```sql\nSELECT COUNT(*) FROM emp;\n```"]
    wrong = ["```sql\nSELECT name FROM emp\n```", "```sql\nDROP TABLE emp; SELECT 3\n```"]
    kw = {"schema": [r["schema"] for r in rows], "expected": [r["expected"] for r in rows]}
    assert mod.sql_matches(prompts=[r["question"] for r in rows], completions=right, **kw) == [1.0, 1.0]
    assert mod.sql_matches(prompts=[r["question"] for r in rows], completions=wrong, **kw) == [0.0, 0.0]


def test_editing_the_user_file_changes_what_the_gate_binds(cli, tmp_path):
    from finetune.hashing import reward_files, sha256_file

    spec = _spec(tmp_path)
    assert cli("rewards", "render", spec).code == 0
    names = [p.name for p in reward_files(tmp_path)]
    assert "rewards_user_mine.py" in names
    before = sha256_file(tmp_path / "rewards_user_mine.py")
    (tmp_path / "rewards_user_mine.py").write_text(USER + "\n# always 1.0\n")
    assert sha256_file(tmp_path / "rewards_user_mine.py") != before


ENV_READER = '''
import os


def check(completion, **_):
    """1.0 when the variable the completion names is visible to the verifier."""
    return 1.0 if os.environ.get(completion) else 0.0
'''


def test_the_verifier_sees_only_the_variables_the_person_allowed(tmp_path, monkeypatch):
    """It runs in the sandbox: HF_TOKEN stays out; a name passed as agent_env (the person's allow-list) comes in."""
    from finetune.rewards.kinds.python import PythonReward
    from finetune.rewards.render import render_sources

    (tmp_path / "env_reader.py").write_text(ENV_READER)
    reward = PythonReward(name="mine", type="python", file="env_reader.py", function="check")
    files = render_sources([reward], source_path=tmp_path / "spec.yaml", agent_env=("ALLOWED_BY_PERSON",))
    assert "AGENT_ENV = ('ALLOWED_BY_PERSON',)" in files["rewards.py"]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("ALLOWED_BY_PERSON", "yes")
    mod = _import(tmp_path)
    assert mod.mine(prompts=["q", "q"], completions=["HF_TOKEN", "ALLOWED_BY_PERSON"]) == [0.0, 1.0]
