"""Helpers of the vLLM tier: a head-size-32 tiny model, rendered run directories, the CPU shim's
environment, and the weight-sync probe's reading.

CPU-only workarounds live in cpu_shim/sitecustomize.py (on PYTHONPATH for the tier's subprocesses only).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))
from envfakes import fake_site  # noqa: E402

HERE = Path(__file__).resolve().parent
SHIM = HERE / "cpu_shim"
PORT = 8000  # the rendered port of `trl vllm-serve` (finetune.config.build.VLLM_SERVER_PORT)
NCCL_ONLY = "Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA device"

# Graded rewards under the spec's reward names (format_ok, correct): a random tiny model never writes
# <answer> tags, so the gated rewards would give every completion 0, no advantage and no update; these
# give the group a spread, so the policy really moves and the weight sync has something to carry.
GRADED_REWARDS = textwrap.dedent('''
    def _text(c):
        return c[0]["content"] if isinstance(c, list) else c


    def format_ok(completions, **kwargs):
        return [sum(ch.isdigit() for ch in _text(c)) / max(1, len(_text(c))) for c in completions]


    def correct(completions, answer, **kwargs):
        return [1.0 if str(gold) in _text(c) else 0.0 for c, gold in zip(completions, answer)]


    REWARD_FUNCS = [format_ok, correct]
    REWARD_WEIGHTS = [0.2, 1.0]
    REWARD_META = [
        {"name": "format_ok", "type": "format", "role": "format", "threshold": 1.0, "min": 0.0, "max": 1.0,
         "weight": 0.2, "gated": False, "episode": False},
        {"name": "correct", "type": "exact_match", "role": "correctness", "threshold": 1.0, "min": 0.0,
         "max": 1.0,
         "weight": 1.0, "gated": False, "episode": False},
    ]
''')


def build_vllm_tiny_model(out: Path) -> Path:
    from finetune.tinymodel import build_tiny_model

    return build_tiny_model(out, hidden=128, heads=4, kv_heads=2)  # head size 128 / 4 = 32


def render_run(run: Path, model: Path, *, hardware: dict[str, Any], graded: bool = True, **changes: Any) -> Path:
    """A --no-gate run directory rendered for ``hardware`` (a GPU target: vLLM on); returns the run dir."""
    from render_fixtures import write_run

    from finetune.cli import main

    changes.setdefault("training__warmup_steps", 0)
    spec = write_run(run, str(model), hardware=hardware, **changes)
    if graded:
        (run / "rewards.py").write_text(GRADED_REWARDS)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return run


def shim_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES")}
    env.update(PYTHONPATH=str(SHIM), VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", WANDB_DISABLED="true", VLLM_LOGGING_LEVEL="WARNING",
               FINETUNE_VLLM_LEARNING_RATE="5e-4")  # moves the random tiny model visibly in one step
    # the runs are --no-gate renders (the tier tests vLLM, not the gate): the test plays the person whose
    # explicit override lets an UNGATED preview train beyond its smoke test
    from finetune.config.build import UNGATED_OVERRIDE

    env["FINETUNE_UNGATED_OVERRIDE"] = UNGATED_OVERRIDE
    env.update(extra)
    return env


# --- server mode: the launch files run for real, with recording wrappers around this environment

def _q(p: Path | str) -> str:
    return shlex.quote(str(p))


def launch_env(tmp: Path, gpus: int = 2) -> tuple[dict[str, str], Path]:
    """FINETUNE_PYTHON: this environment's python, trl and accelerate behind recording wrappers.

    Only env_check.py sees fake GPUs (the config is for 2 GPUs and the check refuses a box without
    them); before the training command starts (train.py, or `accelerate launch`), TRL's VLLMClient
    generates over HTTP from the server the launch started and waited for."""
    real, log, out = Path(sys.executable).parent, tmp / "calls.log", tmp / "http_generate.json"
    # the server's address as the training command names it (--vllm-server-host HOST)
    probe = (f'host=$(echo "$*" | sed -n "s/.*--vllm-server-host \\([^ ]*\\).*/\\1/p"); '
             f'{_q(sys.executable)} {_q(HERE / "http_generate.py")} "$host" {PORT} {_q(out)} '
             f'&& echo "http generate ok from $host" >> {_q(log)}')
    site = fake_site(tmp / "fake-site")
    folder = tmp / "env" / "bin"
    folder.mkdir(parents=True)
    wrappers = {
        "python": f'''echo "python $*" >> {_q(log)}
case "$1" in
  config/env_check.py) PYTHONPATH={_q(site)} FAKE_GPUS={gpus} exec {_q(sys.executable)} "$@" ;;
  config/train.py) {probe} ;;
esac
exec {_q(sys.executable)} "$@"
''',
        "accelerate": f'''echo "accelerate $*" >> {_q(log)}
{probe}
exec {_q(real / "accelerate")} "$@"
''',
        "trl": f'echo "trl $*" >> {_q(log)}\necho $$ > {_q(tmp / "server.pid")}\nexec {_q(real / "trl")} "$@"\n',
    }
    for name, body in wrappers.items():
        (folder / name).write_text("#!/bin/sh\n" + body)
        (folder / name).chmod(0o755)
    env = shim_env(FINETUNE_PYTHON=str(folder / "python"), VLLM_HEALTH_TIMEOUT="900", VLLM_HEALTH_INTERVAL="2",
                   PATH="/usr/local/bin:/usr/bin:/bin")
    return env, log


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def run_train(run: Path, *args: str, timeout: int = 900, **env: str) -> subprocess.CompletedProcess[str]:
    """The rendered config/train.py, unmodified, in this (vLLM) environment under the CPU shim."""
    return subprocess.run([sys.executable, "config/train.py", *args], cwd=run, env=shim_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def tail(res: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "leaked" not in ln and "nanobind" not in ln]
    return "\n".join(lines[-60:])


def log_history(run: Path) -> list[dict[str, Any]]:
    state = json.loads((run / "train" / "trainer_state.json").read_text())
    return [e for e in state["log_history"] if "loss" in e]


# --- the weight-sync check: vLLM's logprobs of a fixed sequence follow the trained policy's

SYNC_TOLERANCE = 0.005  # nats/token: vLLM (CPU) and transformers in float32 agree to <= 0.0015; one step at lr 5e-4 moves >= 0.016


def mean_abs(a: list[float], b: list[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b)) / len(a)


def sync_problems(rows: list[dict[str, Any]]) -> list[str]:
    """Why the probe rows do NOT show synchronised weights ([] when they do).

    Each row is one TRL weight sync: vLLM's logprobs of the fixed sequence before and after it and the
    policy's. Synchronised: after every sync vLLM agrees with the policy, and at least one sync moved
    vLLM by more than the tolerance (the policy had changed since the previous sync)."""
    if len(rows) < 2:
        return [f"only {len(rows)} weight sync(s) probed: no optimiser step between two syncs"]
    problems = [f"sync {r['sync']}: vLLM differs from the policy by {mean_abs(r['vllm_after'], r['policy']):.4f} "
                f"nats/token after the sync" for r in rows
                if mean_abs(r["vllm_after"], r["policy"]) > SYNC_TOLERANCE]
    moved = [mean_abs(r["vllm_before"], r["vllm_after"]) for r in rows[1:]]
    if max(moved) <= SYNC_TOLERANCE:
        problems.append(f"no sync changed vLLM's logprobs (largest change {max(moved):.4f} nats/token)")
    return problems


def read_probe(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
