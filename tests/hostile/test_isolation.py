"""Processes that run reward code start isolated and run the bytes their parent loaded.

A file added to (or changed in) the run directory after the gate PASSed must not change a reward: the
math workers, the sandbox's zygote / probe / sweeper and the scoring child all start with ``-I`` and
an explicit sys.path, and the children run the parent's own compiled code, never a re-read of a file.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path

import pytest

from finetune.rewards.registry import RewardSpec
from finetune.rewards.render import render_sources

_COUNTER = itertools.count()
# A stand-in for the math-verify package that says every answer is right (6 lines, as an agent would write it).
SHADOW_MATH_VERIFY = """\
class LatexExtractionConfig:
    def __init__(self, *a, **k): pass
ExprExtractionConfig = LatexExtractionConfig
def parse(text, *a, **k): return [text]
def verify(gold, answer, *a, **k): return True
"""


def _render_math(run: Path, timeout_s: float):
    """A run dir holding a rendered math reward, imported by path; a timeout unique to the test gives it a
    fresh worker pool (pools are per process and keyed by their settings)."""
    from pydantic import TypeAdapter

    spec = TypeAdapter(RewardSpec).validate_python(
        {"name": "correct", "type": "math", "extract": "boxed", "timeout_s": timeout_s, "workers": 1})
    run.mkdir(parents=True)
    for name, text in render_sources([spec], run_name="iso").items():
        (run / name).write_text(text, encoding="utf-8")
    for stem in ("rewards_mathpool", "rewards_answers"):
        sys.modules.pop(stem, None)  # this test's own copies, loaded from these bytes
    loaded = importlib.util.spec_from_file_location(f"_iso_rewards_{next(_COUNTER)}", run / "rewards.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def _scores(module, completions: list[str], golds: list[str]) -> list[float | None]:
    return list(module.correct(prompts=["q"] * len(completions), completions=completions, answer=golds))


def test_math_worker_ignores_a_shadow_math_verify_in_the_run_dir(tmp_path):
    run = tmp_path / "run"
    module = _render_math(run, 7.125)
    (run / "math_verify.py").write_text(SHADOW_MATH_VERIFY, encoding="utf-8")
    assert _scores(module, ["\\boxed{9973}", "\\boxed{973}"], ["973", "973"]) == [0.0, 1.0]


def test_math_worker_runs_the_loaded_bytes_not_the_file_on_disk(tmp_path):
    """rewards_mathpool.py and rewards_answers.py (which the workers run too: the whole answer path is inside the
    deadline) rewritten after their parent loaded them: the workers still run the loaded code."""
    run = tmp_path / "run"
    module = _render_math(run, 7.375)
    for name, real, fake in (
            ("rewards_mathpool.py", '"score": float(verify(gold_parsed, answer, timeout_seconds=None)) if answer else 0.0',
             '"score": 1.0'),
            ("rewards_answers.py", 'return values, "ok" if len(values) == 1 else "several_values"',
             'return ["973"], "ok"')):
        path = run / name
        text = path.read_text(encoding="utf-8")
        assert real in text
        path.write_text(text.replace(real, fake), encoding="utf-8")
    assert _scores(module, ["\\boxed{9973}", "\\boxed{973}", "\\boxed{\\frac{1}{3}}"], ["973", "973", "1/2"]) == [
        0.0, 1.0, 0.0]


def test_math_worker_command_line_is_isolated(tmp_path):
    """The worker's argv: -I and the boot program (-c), never a script path to run; its cwd is /."""
    run = tmp_path / "run"
    module = _render_math(run, 7.625)
    _scores(module, ["\\boxed{\\frac{1}{2}}"], ["\\frac{1}{2}"])  # not two plain decimals: a worker decides
    pool = next(p for k, p in sys.modules["rewards_mathpool"]._POOLS.items() if k[1] == 7.625)
    argv = pool.workers[0].proc.args
    assert argv[1:4] == ["-I", "-u", "-c"] and argv[-1] == "--worker"
    assert Path(f"/proc/{pool.workers[0].proc.pid}/cwd").resolve() == Path("/")


# ------------------------------------------------------------------------------------- the sandbox --

def _sandbox_copy(run: Path):
    """The runner copied into a run dir as rewards_sandbox.py and loaded by path, as rewards.py loads it."""
    from finetune.sandbox import runner_source

    (run / "rewards_sandbox.py").write_text(runner_source(), encoding="utf-8")
    loaded = importlib.util.spec_from_file_location(f"_iso_sandbox_{next(_COUNTER)}", run / "rewards_sandbox.py")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[loaded.name] = module  # dataclasses look their module up
    loaded.loader.exec_module(module)
    return module


@pytest.fixture
def outside_run(tmp_path, monkeypatch):
    """A run dir with the training file, outside /tmp, /root and /home (beside the repository, as a
    project keeps its runs), while the trusted side works in another folder."""
    import shutil
    import tempfile

    from finetune.sandbox.runner import detect_isolation

    if not detect_isolation().at_least("namespaces"):
        pytest.skip("hiding folders needs the namespaces level (root with CAP_SYS_ADMIN)")
    base = Path(tempfile.mkdtemp(prefix=".iso-run-", dir=Path(__file__).resolve().parents[2]))
    monkeypatch.chdir(tmp_path)
    try:
        run = base / "runs" / "demo"
        (run / "data").mkdir(parents=True)
        (run / "data" / "train.jsonl").write_text(json.dumps({"prompt": "sum", "gold": "GOLD-4817"}) + "\n")
        yield run
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_sandbox_candidate_cannot_read_the_training_file(outside_run):
    """A program that reads the training file and prints the gold it is tested on must fail."""
    sandbox = _sandbox_copy(outside_run)
    data = outside_run / "data" / "train.jsonl"
    cheat = f"import json\nprint(json.loads(open({str(data)!r}).readline())['gold'])\n"
    listing = f"import os\nprint(os.path.exists({str(outside_run)!r}), os.path.exists({str(data)!r}))\n"
    with sandbox.SandboxPool(workers=1, timeout_s=10.0, memory_mb=256, min_isolation="namespaces") as pool:
        read, listed = pool.run_batch([sandbox.StdioJob(cheat, [sandbox.StdioTest("", "GOLD-4817\n")]),
                                       sandbox.StdioJob(listing, [sandbox.StdioTest("", "False False\n")])])
    assert not read.passed and read.status == "crashed", read
    assert listed.passed, listed  # neither the run dir nor the data exist in the candidate's view


def test_sandbox_children_run_the_loaded_code_not_the_file(outside_run):
    """rewards_sandbox.py rewritten after it was loaded: the zygote still runs the loaded code (a forged
    zygote here would pass every test)."""
    sandbox = _sandbox_copy(outside_run)
    copy = outside_run / "rewards_sandbox.py"
    copy.write_text(copy.read_text(encoding="utf-8").replace(
        "def _zygote_main(cfg: dict[str, Any]) -> None:",
        "def _zygote_main(cfg: dict[str, Any]) -> None:\n    raise SystemExit('forged zygote ran')\n"
        "\n\ndef _unused(cfg: dict[str, Any]) -> None:"), encoding="utf-8")
    job = sandbox.StdioJob("print(input())", [sandbox.StdioTest("7\n", "7\n")])
    with sandbox.SandboxPool(workers=1, timeout_s=10.0, memory_mb=256, min_isolation="namespaces") as pool:
        assert pool.run(job).passed
    assert sandbox.detect_isolation().level == "namespaces"


# ------------------------------------------------------------------------------ the scoring child --

@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_scoring_child_is_isolated_and_sees_no_run_dir_module(base_run, tmp_path, monkeypatch):
    """`inspect score` run from inside the run dir: the child that imports rewards.py has -I, no cwd and no
    run dir on its path, so a module left in the run dir is not what the reward code imports."""
    import shutil

    from finetune.cli import main

    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    (run / "iso_shadow.py").write_text("CREDIT = 1.0\n")
    with (run / "rewards.py").open("a", encoding="utf-8") as fh:
        fh.write("\nimport sys as _sys, os as _os\n"
                 "_where = [p for p in _sys.path if p in ('', '.') or _os.path.abspath(p) in (_os.getcwd(),"
                 f" {str(run)!r})]\n"
                 "if not _sys.flags.isolated or _where:\n"
                 "    raise RuntimeError(f'scoring child not isolated: {_sys.flags.isolated} {_where}')\n"
                 "try:\n    import iso_shadow\nexcept ImportError:\n    pass\n"
                 "else:\n    raise RuntimeError('a run-dir module was importable')\n")
    monkeypatch.chdir(run)
    monkeypatch.syspath_prepend(str(run))  # as `python -m finetune` from the run dir would have it
    assert main(["inspect", "score", str(run)]) == 0


# ------------------------------------------------------------------------------------------ train.py --

@pytest.mark.slow
def test_train_py_does_not_import_modules_left_beside_it(tmp_path):
    """python config/train.py puts config/ first on sys.path: a json.py / argparse.py planted there must not
    be what train.py imports (its --help runs the module's imports)."""
    from finetune.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from render_fixtures import write_run

    spec = write_run(tmp_path / "run", "Qwen/Qwen3-1.7B")
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    config = spec.parent / "config"
    marker = tmp_path / "shadowed"
    for name in ("json", "argparse", "hashlib", "trl", "transformers", "yaml"):
        (config / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\nraise SystemExit(3)\n")
    import subprocess

    out = subprocess.run([sys.executable, str(config / "train.py"), "--help"], capture_output=True, text=True,
                         cwd=spec.parent, timeout=300)
    assert not marker.exists(), marker.read_text()
    assert out.returncode == 0, out.stderr[-1500:]
