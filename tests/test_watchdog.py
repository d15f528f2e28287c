"""The stall watchdog (finetune.watchdog, rendered as config/watchdog.py): a real trainer-side process whose weight
sync or generation hangs is stopped by the sidecar with the moment named and every thread's stack dumped; the
rules that derive its bounds; TRL 1.16's methods it times exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from finetune import watchdog

ROOT = Path(__file__).resolve().parents[1]

# A trainer process whose weight sync hangs the way an NCCL one does: TRL 1.16's own VLLMGeneration.sync_weights
# (timed by watch_trl) walks the parameters, and the walk blocks in a torch.distributed collective (gloo) whose
# second rank never arrives — C++ waiting, not Python sleeping.
HANGING_SYNC = textwrap.dedent('''
    import sys, types
    import torch.distributed as dist
    from finetune import watchdog
    from trl.generation.vllm_generation import VLLMGeneration

    out, store = sys.argv[1], sys.argv[2]
    dog = watchdog.Watchdog({"weight_sync": 2.0}, out, poll_s=0.2, grace_s=5.0).start()
    watchdog.watch_trl(dog)

    def blocking_params():
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=2)  # rank 1 never comes
        yield "w", None

    engine = types.SimpleNamespace(mode="server", enable_sleep_mode=False, _weight_metadata=None,
                                   accelerator=types.SimpleNamespace(is_main_process=True),
                                   _iter_named_params=blocking_params)
    print("syncing", flush=True)
    VLLMGeneration.sync_weights(engine)
    print("sync returned", flush=True)
''')


def _run_until_stopped(cmd: list[str], timeout: float, **kw) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    # its own process group, as launch.sh's job is under a shell: the watchdog stops the whole group
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, start_new_session=True, **kw)
    return res, time.monotonic() - t0


@pytest.mark.slow
def test_a_hanging_weight_sync_is_stopped_and_named(tmp_path):
    script = tmp_path / "sync.py"
    script.write_text(HANGING_SYNC)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res, took = _run_until_stopped([sys.executable, str(script), str(tmp_path / "train"), str(tmp_path / "store")],
                                   120, env=env)
    assert res.returncode == -15 and "syncing" in res.stdout and "sync returned" not in res.stdout, res.stderr[-2000:]
    assert took < 60
    stalled = json.loads((tmp_path / "train" / watchdog.STALLED).read_text())
    assert stalled["moment"] == "weight_sync" and stalled["budget_s"] == 2.0 and stalled["elapsed_s"] >= 2.0
    assert "NCCL" in stalled["cause"] and "stalled at weight_sync" in res.stderr
    stacks = Path(stalled["stacks"]).read_text()
    assert "blocking_params" in stacks and "sync_weights" in stacks, stacks  # where it hung, from faulthandler
    # `finetune status` reads the same file back: Phase 3 failed, naming the moment, the cause and the stacks
    from finetune import status

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "train.py").write_text("# rendered before the launch that stalled\n")
    then = (tmp_path / "train" / watchdog.STALLED).stat().st_mtime - 10
    os.utime(tmp_path / "config" / "train.py", (then, then))
    state, detail = status._train(status._Run(tmp_path))
    assert state == status.FAILED and "stalled at weight_sync" in detail and "NCCL" in detail, detail
    assert stalled["stacks"] in detail and "launch.sh --dry-run" in detail


def test_moments_and_bounds():
    assert watchdog.overdue({"generation": 0.0, "weight_sync": 5.0}, {"generation": 100.0, "weight_sync": 2.0},
                            now=8.0) == ("weight_sync", 3.0)  # the inner moment, past its own budget
    assert watchdog.overdue({"generation": 0.0}, {"generation": 100.0}, now=50.0) is None
    assert watchdog.overdue({"step": 0.0}, {}, now=1e9) is None  # a moment without a budget is never late
    bounds = watchdog.bounds_from_dry_run({"weight_sync": 200.0, "generation": 1.0, "other": 3.0})
    assert bounds == {"weight_sync": 1000.0, "generation": watchdog.FLOORS["generation"]}
    got = watchdog.budgets_from({"step": 30}, {"moments": {"weight_sync": 200.0}})
    assert got["step"] == 30.0 and got["weight_sync"] == 1000.0 and got["model_load"] == watchdog.BUDGETS["model_load"]
    assert watchdog.parse_budget("generation=2.5") == ("generation", 2.5)
    for bad in ("generate=3", "generation", "generation=soon", "step=0"):
        with pytest.raises(ValueError, match="--budget"):
            watchdog.parse_budget(bad)


def test_only_the_first_stall_is_recorded(tmp_path):
    path = tmp_path / "train" / watchdog.STALLED
    assert watchdog.write_stalled(path, {"moment": "weight_sync", "rank": 3})
    assert not watchdog.write_stalled(path, {"moment": "step", "rank": 0})
    assert json.loads(path.read_text())["rank"] == 3


def test_a_dry_run_of_another_train_py_is_not_used(tmp_path):
    path = tmp_path / "dryrun.json"
    path.write_text(json.dumps({"train_py_sha256": "a" * 64, "moments": {"generation": 1.0}}))
    assert watchdog.read_dry_run(path, "a" * 64)["moments"] == {"generation": 1.0}
    assert watchdog.read_dry_run(path, "b" * 64) is None
    path.write_text("[1]")
    assert watchdog.read_dry_run(path, "a" * 64) is None


def test_the_trl_methods_it_times_exist():
    """TRL 1.16's VLLMGeneration._init_vllm / sync_weights and GRPOTrainer._generate (trl/generation/
    vllm_generation.py, trl/trainer/grpo_trainer.py): a TRL that renames one fails here, not silently unwatched."""
    import importlib

    for module, cls, attr, moment in watchdog.TRL_MOMENTS:
        assert callable(getattr(getattr(importlib.import_module(module), cls), attr)) and moment in watchdog.MOMENTS


def test_a_normal_end_leaves_no_sidecar_and_no_stop(tmp_path):
    dog = watchdog.Watchdog({"generation": 30.0}, tmp_path, poll_s=0.1).start()
    with dog.moment("generation"):
        pass
    sidecar = dog._proc
    dog.close()
    assert sidecar is not None and sidecar.poll() == 0
    assert not (tmp_path / watchdog.STALLED).exists()
    kept = list((tmp_path / watchdog.FOLDER).iterdir())  # no stacks (nothing stalled), the durations
    assert [f.name for f in kept] == [f"moments-{os.getpid()}.json"]
    assert json.loads(kept[0].read_text())["generation"]["count"] == 1 and list(dog.first()) == ["generation"]


# The rendered train.py with the model's generate made to hang in C code holding the GIL (catastrophic regex
# backtracking): no Python thread of the trainer could run, the sidecar still stops it.
HANGING_GENERATION = textwrap.dedent('''
    import importlib.util, re, sys
    import transformers

    def hang(self, *args, **kwargs):
        print("generating", flush=True)
        re.match(r"(a*)*b", "a" * 64)

    transformers.GenerationMixin.generate = hang
    spec = importlib.util.spec_from_file_location("train", sys.argv[1])
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.main(["--cpu", "--max-steps", "2", "--budget", "generation=3"])
''')


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory, tiny_model_dir) -> Path:
    """A CPU run rendered around its own copy of the tiny model (the pre-flight test below edits the copy)."""
    import shutil

    sys.path.insert(0, str(ROOT / "tests"))
    from render_fixtures import write_run

    from finetune.cli import main

    root = tmp_path_factory.mktemp("wd")
    model = root / "model"
    shutil.copytree(tiny_model_dir, model)
    spec = write_run(root / "run", str(model), hardware={"profile": "cpu", "gpus": 0, "nodes": 1})
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def _env() -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")


@pytest.mark.slow
def test_dry_run_times_the_moments_and_a_hanging_generation_is_stopped(cpu_run, tmp_path):
    """A healthy one-step dry run (the transformers path on CPU) is not stopped and records each moment's first
    duration; then the real train.py, its generation hanging, is stopped naming `generation`."""
    res = subprocess.run([sys.executable, "config/train.py", "--cpu", "--dry-run"], cwd=cpu_run, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    record = json.loads((cpu_run / "train" / watchdog.DRY_RUN).read_text())
    assert record["used"] == ["model_load", "generation", "step"] and all(v > 0 for v in record["moments"].values())
    assert record["train_py_sha256"] == watchdog.file_sha256(cpu_run / "config" / "train.py")
    assert "| vllm_start | not used |" in res.stdout and not (cpu_run / "train" / watchdog.STALLED).exists()
    assert not (cpu_run / "train" / "metrics.jsonl").exists()  # the dry run writes under train/dryrun/

    bad = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1", "--budget", "generate=3"], cwd=cpu_run,
                         env=_env(), capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("error: --budget 'generate=3'")

    driver = tmp_path / "hang.py"
    driver.write_text(HANGING_GENERATION)
    res, took = _run_until_stopped([sys.executable, str(driver), str(cpu_run / "config" / "train.py")], 600,
                                   cwd=cpu_run, env=_env())
    assert res.returncode == -15 and "generating" in res.stdout, res.stderr[-3000:]
    stalled = json.loads((cpu_run / "train" / watchdog.STALLED).read_text())
    assert stalled["moment"] == "generation" and stalled["budget_s"] == 3.0
    stacks = Path(stalled["stacks"]).read_text()
    assert "in hang" in stacks and "_generate" in stacks, stacks


@pytest.mark.slow
def test_train_py_refuses_an_empty_completion_mask_before_loading_the_model(cpu_run):
    """The rendered train.py's pre-flight (config/preflight.py) on a gated sample: with a model whose generation
    stops on no token its chat template ends a turn with, TRL would mask every completion away (or train past the
    turn's end); train.py refuses before any weight loads. (Here beside the watchdog: the same rendered run.)"""
    model = Path(json.loads((cpu_run / "config" / "target.json").read_text())["inputs"]["model"])
    model = model if model.is_absolute() else cpu_run / model
    saved = {name: (model / name).read_text() for name in ("generation_config.json", "tokenizer_config.json")}
    sample = {"id": "s0", "prompt": [{"role": "user", "content": "What is 1 plus 2?"}], "completion": "3",
              "conversational": True}
    (cpu_run / "samples.jsonl").write_text(json.dumps(sample) + "\n")
    metrics = cpu_run / "train" / "metrics.jsonl"
    before = metrics.stat().st_mtime_ns if metrics.exists() else None
    try:
        gen, tok = (json.loads(saved[n]) for n in ("generation_config.json", "tokenizer_config.json"))
        (model / "generation_config.json").write_text(json.dumps(gen | {"eos_token_id": 0}))
        (model / "tokenizer_config.json").write_text(json.dumps(tok | {"eos_token": "<|pad|>"}))
        res = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=cpu_run,
                             env=_env(), capture_output=True, text=True, timeout=600)
        assert res.returncode == 1 and "refusing to train: on samples.jsonl sample s0" in res.stderr, res.stderr[-2000:]
        assert "<|end|>" in res.stderr and "eos_token_id" in res.stderr
        metrics = cpu_run / "train" / "metrics.jsonl"
        assert (metrics.stat().st_mtime_ns if metrics.exists() else None) == before  # refused before training
    finally:
        for name, text in saved.items():
            (model / name).write_text(text)
        (cpu_run / "samples.jsonl").unlink()
