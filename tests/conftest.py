"""Shared fixtures. One tiny model per test session: importing torch/TRL and building models is
the expensive part of this suite, so everything that needs a real model shares these."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# unmarked tests that spend more than a few CPU seconds fail (slow_budget.py: `slow` marks what is slow)
pytest_plugins = ["slow_budget"]

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")


@pytest.fixture(scope="session", autouse=True)
def person_config(tmp_path_factory) -> Path:
    """XDG_CONFIG_HOME for the session: the person's key (inspect/personkey.py) is made there, never in the real
    ~/.config. pytest-xdist workers share one folder (their temp roots share a parent), so a verdict one worker's
    person signed checks in another's; subprocesses inherit it."""
    root = tmp_path_factory.getbasetemp()
    folder = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "xdg-config"
    folder.mkdir(exist_ok=True)
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer Qwen3 + WordLevel tokenizer saved on disk (pass it by path)."""
    from finetune.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")


@pytest.fixture(scope="session")
def tiny_moe_model_dir(tmp_path_factory) -> Path:
    from finetune.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-moe") / "model", moe=True)


@pytest.fixture(scope="session")
def hf_home(tmp_path_factory, tiny_model_dir) -> Path:
    """HF_HOME (and HF_HUB_CACHE) for the session: a temp Hugging Face cache holding the tiny model as
    ``HUB_REPO_ID``, so hub ids resolve through the real huggingface_hub code, fully offline."""
    from hfcache_helpers import HUB_REPO_ID, install_in_hf_cache

    home = tmp_path_factory.mktemp("hf-home")
    install_in_hf_cache(tiny_model_dir, home / "hub", HUB_REPO_ID)
    saved = {k: os.environ.get(k) for k in ("HF_HOME", "HF_HUB_CACHE")}
    os.environ["HF_HOME"], os.environ["HF_HUB_CACHE"] = str(home), str(home / "hub")
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """`finetune demo` run once per test session (reader: its independent checker); the DemoResult.

    Shared by tests/demo/test_demo.py and tests/test_finetune_command.py (which reuses its model and data).
    Under pytest-xdist every worker would build its own session fixture; the workers of one session
    share a temp root, so the first one runs the demo under a lock and the others read its record.
    """
    import fcntl
    import json
    import subprocess
    import sys

    from finetune.demo.runner import DemoResult, Phase

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp("demo")
    else:
        root = tmp_path_factory.getbasetemp().parent / "shared-demo"
        root.mkdir(exist_ok=True)
    out, console_file = root / "out", root / "console.txt"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "demo.json").is_file() and console_file.is_file():
            record = json.loads((out / "demo.json").read_text())
            result = DemoResult(out=out.resolve(), reader=record["reader"], facts=record["facts"],
                                phases=[Phase(**p) for p in record["phases"]])
        else:
            # a fresh interpreter: the demo's numbers must not depend on what other tests of this worker left
            # behind in torch's global state (threads, deterministic-algorithm flags, seeds), which varies with
            # how pytest-xdist happened to distribute the tests
            env = {**os.environ, "COLUMNS": "160", "TERM": "dumb"}
            proc = subprocess.run([sys.executable, "-m", "finetune", "demo", "--no-tools", "--reader", "checker", "-o", str(out)],
                                  capture_output=True, text=True, env=env, timeout=1800)
            console_file.write_text(proc.stdout)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            record = json.loads((out / "demo.json").read_text())
            result = DemoResult(out=out.resolve(), reader=record["reader"], facts=record["facts"],
                                phases=[Phase(**p) for p in record["phases"]])
    result.console_text = console_file.read_text()
    return result


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


@pytest.fixture
def cli(capsys):
    """Run `finetune ...` in-process (no new interpreter, no re-import of torch/TRL)."""
    from finetune.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def pytest_collection_modifyitems(config, items):
    # Browser tests need Debian's chromium; skip them loudly (not silently pass) when it is missing.
    chromium = Path("/usr/bin/chromium")
    for item in items:
        if "browser" in item.keywords and not chromium.exists():
            item.add_marker(pytest.mark.skip(reason="needs /usr/bin/chromium (apt-get install chromium)"))
