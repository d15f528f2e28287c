"""A `type: python` verifier's own modules (a local answer_rules.py it imports) are copied beside rewards.py as
rewards_lib_NAME.py, bound by the gate like every rewards_*.py, and imported by exact name and path: an edit
after the PASS voids it (config render, status, train.py), and train.py run as launch.sh runs it (the run folder
not on sys.path) imports the copy instead of dying with ModuleNotFoundError or importing whatever the path holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from render_fixtures import pass_phase1, write_run  # noqa: E402

CHECKER = '''
from answer_rules import last_answer


def answer_matches(completion, prompt="", answer=None, **_):
    """1.0 when the completion ends with one <answer>...</answer> holding exactly the gold answer."""
    if answer is None:
        return None
    import normalise  # imported at call time too: found the same way

    found = last_answer(completion)
    return found is not None and normalise.norm(found) == normalise.norm(str(answer))
'''
ANSWER_RULES = '''
import re

from normalise import norm  # a module imported by a module of the verifier: copied too


def last_answer(completion):
    found = re.findall(r"<answer>(.*?)</answer>", completion, flags=re.S)
    if not completion.rstrip().endswith("</answer>") or len(set(norm(f) for f in found)) != 1:
        return None
    return found[-1]
'''
NORMALISE = "def norm(text):\n    return text.strip()\n"
FORGED = "def norm(text):\n    return '7'\n"  # every answer equals every gold


def _verifier_run(run: Path, model: str, cli) -> Path:
    """A run whose python reward lives in verifier/ (not the run folder): checker.py + its two modules."""
    spec_path = write_run(run, model)
    (run / "verifier").mkdir()
    for name, text in (("checker.py", CHECKER), ("answer_rules.py", ANSWER_RULES), ("normalise.py", NORMALISE)):
        (run / "verifier" / name).write_text(text)
    spec = yaml.safe_load(spec_path.read_text())
    spec["rewards"][1] = {"name": "mine", "type": "python", "file": "verifier/checker.py",
                          "function": "answer_matches", "columns": ["answer"], "weight": 1.0}
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = cli("rewards", "render", spec_path)
    assert r.code == 0, r
    return spec_path


def test_the_verifiers_modules_are_copied_and_imported_by_path(cli, tmp_path):
    spec = _verifier_run(tmp_path / "run", "Qwen/Qwen3-1.7B", cli)
    run = spec.parent
    assert (run / "rewards_lib_answer_rules.py").read_text() == ANSWER_RULES
    assert (run / "rewards_lib_normalise.py").read_text() == NORMALISE
    assert "re" not in {p.name for p in run.glob("rewards_lib_*")}  # libraries are not copied
    # a `normalise` elsewhere on the path (the verifier's folder, the cwd) is not what the reward imports
    (tmp_path / "normalise.py").write_text(FORGED)
    probe = ("import importlib.util, sys\n"
             f"s = importlib.util.spec_from_file_location('rewards', {str(run / 'rewards.py')!r})\n"
             "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n"
             "print(m.mine(prompts=['q', 'q'], completions=['<answer>7</answer>', '<answer>12</answer>'],"
             " answer=['12', '12']))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("[0.0, 1.0]"), out.stdout


def test_two_runs_in_one_process_each_import_their_own_module(cli, tmp_path):
    """Two runs' verifiers both `import normalise` (one forged): loaded in one process, each scores with its own."""
    import importlib.util

    scores = []
    for name, text in (("good", NORMALISE), ("forged", FORGED)):
        spec = _verifier_run(tmp_path / name, "Qwen/Qwen3-1.7B", cli)
        (spec.parent / "rewards_lib_normalise.py").write_text(text)
        loaded = importlib.util.spec_from_file_location(f"_two_runs_{name}", spec.parent / "rewards.py")
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
        scores.append(module.mine(prompts=["q"], completions=["<answer>12</answer>"], answer=["13"]))
    assert scores == [[0.0], [1.0]]
    for stem in ("normalise", "answer_rules", "rewards_user_mine"):
        sys.modules.pop(stem, None)


@pytest.mark.parametrize("local, phrase", [("json.py", "named like the library"), ("answer_rules/__init__.py",
                                                                                      "local package")])
def test_a_local_module_that_cannot_be_bound_is_refused_at_render(cli, tmp_path, local, phrase):
    spec = _verifier_run(tmp_path / "run", "Qwen/Qwen3-1.7B", cli)
    folder = spec.parent / "verifier"
    if local.startswith("answer_rules/"):
        (folder / "answer_rules.py").unlink()
        (folder / "answer_rules").mkdir()
        (folder / local).write_text(ANSWER_RULES)
    else:
        (folder / "checker.py").write_text("import json\n" + CHECKER)
        (folder / local).write_text("x = 1\n")
    before = (spec.parent / "rewards.py").read_bytes()
    r = cli("rewards", "render", spec)
    assert r.code == 2 and phrase in r.err and len(r.err.strip().splitlines()) == 1, r
    assert (spec.parent / "rewards.py").read_bytes() == before


@pytest.mark.slow
def test_an_edited_verifier_module_voids_the_pass_and_train_py_imports_the_copy(cli, tmp_path, tiny_model_dir):
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    spec = _verifier_run(tmp_path / "run", str(tiny_model_dir), cli)
    run = spec.parent
    record = pass_phase1(cli, spec)
    assert {"rewards_lib_answer_rules.py", "rewards_lib_normalise.py"} <= set(record["hashes"])
    assert cli("config", "render", spec).code == 0
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    # as launch.sh runs it: from the run folder, which is not on sys.path (train.py removes config/ and '')
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = json.loads(next(run.rglob("trainer_state.json")).read_text())
    assert any("rewards/mine/mean" in entry for entry in state["log_history"])

    (run / "rewards_lib_normalise.py").write_text(FORGED)  # after the PASS: every answer is right
    check = verify_gate(run, load_spec(spec))
    assert not check.ok and "rewards_lib_normalise.py" in check.reason
    assert cli("config", "render", spec).code == 1
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "rewards_lib_normalise.py" in proc.stderr, proc.stderr[-2000:]
