"""An ungated config cannot train: `config render --no-gate` (covered by the agent's pre-approved
`config render` rule) writes a preview whose train.py runs a CPU smoke test at most and whose launch
files refuse to start, unless a person sets an override no pre-approved rule can set; status and
BRIEF.md say UNGATED in their first line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from render_fixtures import write_run  # noqa: E402
from test_command_permissions import _command, bash_rules, covers  # noqa: E402


@pytest.fixture(scope="module")
def ungated_run(tmp_path_factory, tiny_model_dir) -> Path:
    from finetune.cli import main

    spec = write_run(tmp_path_factory.mktemp("ungated") / "run", str(tiny_model_dir),
                     hardware={"profile": "cpu", "gpus": 0, "nodes": 1})
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FINETUNE_UNGATED_OVERRIDE"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               FINETUNE_PYTHON=sys.executable, **extra)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _train(run: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "config/train.py", *args], cwd=run, env=_env(**env), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args", [(), ("--cpu",), ("--cpu", "--max-steps", "3"), ("--max-steps", "1"),
                                  ("--cpu", "--max-steps", "0"), ("--cpu", "--max-steps", "-1")])
def test_an_ungated_train_py_refuses_beyond_a_smoke_test(ungated_run, args):
    proc = _train(ungated_run, *args)
    assert proc.returncode == 1 and "refusing to train: UNGATED preview" in proc.stderr, proc.stderr[-2000:]
    assert "FINETUNE_UNGATED_OVERRIDE" in proc.stderr and not (ungated_run / "train").exists()
    wrong = _train(ungated_run, *args, FINETUNE_UNGATED_OVERRIDE="yes")  # only the exact phrase
    assert wrong.returncode == 1 and "UNGATED preview" in wrong.stderr


@pytest.mark.parametrize("script", ["launch.sh"])
def test_ungated_launch_files_refuse_to_start_without_the_persons_override(ungated_run, script):
    for value in (None, "", "1", "yes"):
        env = _env() if value is None else _env(FINETUNE_UNGATED_OVERRIDE=value)
        res = subprocess.run(["bash", f"config/{script}", "--cpu", "--max-steps", "1"], cwd=ungated_run, env=env,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1 and "refusing to start: UNGATED preview" in res.stderr, res.stderr
        assert not (ungated_run / "train").exists()


def test_the_override_is_outside_every_pre_approved_rule():
    from finetune.config.build import UNGATED_OVERRIDE

    front, _ = _command()
    for call in (f"FINETUNE_UNGATED_OVERRIDE='{UNGATED_OVERRIDE}' bash runs/my-task/config/launch.sh",
                 f"FINETUNE_UNGATED_OVERRIDE='{UNGATED_OVERRIDE}' python runs/my-task/config/train.py",
                 "bash runs/my-task/config/launch.sh", "python runs/my-task/config/train.py --cpu --max-steps 2"):
        assert not [r for r in bash_rules(front) if covers(r, call)], call


def test_status_and_brief_say_ungated_first(ungated_run, cli):
    brief = (ungated_run / "config" / "BRIEF.md").read_text().splitlines()
    assert "UNGATED" in brief[0], brief[:2]
    r = cli("status", ungated_run)
    assert r.out.splitlines()[0].startswith("UNGATED: config/ was rendered with --no-gate"), r.out[:300]
    for name in ("launch.sh", "grpo_config.yaml", "train.py"):
        assert "UNGATED" in (ungated_run / "config" / name).read_text()[:1200], name


def test_a_gated_render_is_not_called_ungated(tmp_path, cli):
    from finetune.status import ungated

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "train.py").write_text("GATE_REQUIRED = True\n")
    assert ungated(tmp_path) is None


@pytest.mark.parametrize("overrides, phrase", [
    ({"generation_kwargs": {"temperature": 0.05, "top_k": 1}}, "sampling"),
    ({"temperature": 0.05}, "algorithm-defining"),
    ({"top_k": 1}, "algorithm-defining"),
    ({"top_p": 0.5}, "algorithm-defining"),
    ({"min_p": 0.2}, "algorithm-defining"),
    ({"repetition_penalty": 1.3}, "algorithm-defining"),
    ({"max_completion_length": 16}, "algorithm-defining"),
    ({"vllm_structured_outputs_regex": "7"}, "sampling"),
    ({"ref_model_sync_steps": 8}, "reference model"),
    ({"chat_template_kwargs": {"enable_thinking": False}}, "sampling"),
    ({"sync_ref_model": True}, "reference model"),
    ({"ref_model_mixup_alpha": 0.9}, "reference model"),
    ({"trust_remote_code": True}, "remote code"),
    ({"model_init_kwargs": {"trust_remote_code": True}}, "cannot be overridden"),
    ({"model_init_kwargs": {"device_map": [{"trust_remote_code": True}]}}, "cannot be overridden"),
])
def test_overrides_cannot_touch_sampling_the_reference_or_remote_code(tmp_path, tiny_model_dir, cli, overrides, phrase):
    spec = write_run(tmp_path / "r", str(tiny_model_dir), overrides=overrides)
    r = cli("config", "render", spec, "--no-gate")
    assert r.code == 2 and f"overrides.{next(iter(overrides))}" in r.err and phrase in r.err, r.err
    assert not (spec.parent / "config").exists()


def test_train_py_refuses_a_run_directory_with_a_module_shadowing_a_library(ungated_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ungated_run, run)
    (run / "math_verify.py").write_text("def verify(*a, **k):\n    return True\n")
    proc = _train(run, "--cpu", "--max-steps", "1")
    assert proc.returncode == 1 and "math_verify.py" in proc.stderr and "stand in" in proc.stderr, proc.stderr[-1500:]
    assert not (run / "train").exists()


def test_an_edited_inspection_callback_does_not_train(ungated_run, tmp_path):
    """config/watch.py is bound to the train.py rendered with it: an edit (here: no stop rule ever fires)
    is refused before the first step, not trained on silently."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ungated_run, run)
    watch = run / "config" / "watch.py"
    watch.write_text(watch.read_text() + "\n\ndef _never_stop(*a, **k):\n    return None\n")
    proc = _train(run, "--cpu", "--max-steps", "1")
    assert proc.returncode == 1 and "watch.py differs from the inspection callback" in proc.stderr, proc.stderr[-1500:]
    assert not (run / "train").exists()
