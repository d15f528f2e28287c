"""`finetune env check [RUN]`: each missing piece with its install line; exit 0 / 1.

Every check runs in a real subprocess whose view of the machine is changed from outside (envfakes):
modules blocked by a meta-path finder, GPUs reported by a patched torch, packages that only carry a
version. Nothing is mocked inside the checker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from envfakes import base_env, fake_site
from render_fixtures import write_run

PY = sys.executable


def _render(tmp: Path, model: str, **changes) -> Path:
    from finetune.cli import main

    spec = write_run(tmp, model, **changes)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def _check(run: Path, site: Path | None = None, *, standalone: bool = False, **env: str):
    extra = dict(env, PYTHONPATH=str(site)) if site else env
    cmd = [PY, "config/env_check.py"] if standalone else [PY, "-m", "finetune", "env", "check", str(run)]
    return subprocess.run(cmd, cwd=run, env=base_env(**extra), capture_output=True, text=True, timeout=300)


def _fixes(out: str) -> dict[str, str]:
    return {line.split(":", 1)[0][4:]: line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("fix ")}


@pytest.fixture(scope="module", autouse=True)
def hub_cache(tmp_path_factory, tiny_model_dir):
    """The configs' hub id in a Hugging Face cache (env check verifies the model resolves; the tests are offline)."""
    from hfcache_helpers import install_in_hf_cache

    cache = tmp_path_factory.mktemp("hub-cache")
    install_in_hf_cache(tiny_model_dir, cache, "Qwen/Qwen3-1.7B")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory, tiny_model_dir) -> Path:
    return _render(tmp_path_factory.mktemp("env") / "cpu", str(tiny_model_dir),
                   hardware={"profile": "cpu", "gpus": 0, "nodes": 1})


@pytest.fixture(scope="module")
def node_run(tmp_path_factory) -> Path:
    """One node of 8 H100s: `trl vllm-serve` + DeepSpeed ZeRO training processes; a json_schema reward."""
    return _render(tmp_path_factory.mktemp("env") / "node", "Qwen/Qwen3-1.7B",
                   hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 1},
                   rewards=[{"name": "format_ok", "type": "format", "pattern": "answer_tag", "weight": 0.2},
                            {"name": "correct", "type": "json_schema", "schema": {"type": "object"}, "weight": 1.0}])


def test_target_json_states_what_the_config_needs(node_run, cpu_run):
    target = json.loads((node_run / "config" / "target.json").read_text())
    need = {p["name"]: p["require"] for p in target["packages"]}
    assert need["trl"] == "==1.16.0" and need["torch"] == "==2.13.0" and need["deepspeed"] == "==0.19.8"
    assert need["vllm"] == "<=0.31.0,>=0.22.0" and need["jsonschema"] == "==4.26.0"  # TRL 1.16's vllm range
    assert target["hardware"] == {"profile": "h100-80gb", "cpu": False, "nodes": 1, "gpus_per_node": 8,
                                  "gpu_memory_gib": target["hardware"]["gpu_memory_gib"],
                                  "vllm_gpus": target["hardware"]["vllm_gpus"], "host_cpus": None,
                                  # finetune.placement's layout and the profile's GPU facts (hardware.gpu_requirements)
                                  "generation_gpu_ids": list(range(target["hardware"]["vllm_gpus"])),
                                  "training_gpu_ids": list(range(target["hardware"]["vllm_gpus"], 8)),
                                  "gpu": {"profile": "h100-80gb", "compute_capability": [9, 0], "arch": "sm_90",
                                          "min_cuda": "11.8"},
                                  "processes_per_node": 8 - target["hardware"]["vllm_gpus"]}
    assert target["hardware"]["vllm_gpus"] >= 1 and target["sandbox"] is None  # server mode; no sandboxed reward
    assert [s["name"] for s in target["scripts"]] == ["trl", "accelerate"] and target["tools"][0]["name"] == "curl"
    cpu = json.loads((cpu_run / "config" / "target.json").read_text())
    assert {p["name"] for p in cpu["packages"]} == {"torch", "trl", "transformers", "accelerate", "datasets"}
    assert cpu["hardware"]["cpu"] and not cpu["scripts"] and not cpu["tools"]


@pytest.mark.slow
def test_cpu_target_is_ready_here(cpu_run):
    res = _check(cpu_run)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ready: this environment can run the config" in res.stdout and "MISSING" not in res.stdout


@pytest.mark.slow
def test_env_check_py_is_standalone(cpu_run, tmp_path):
    # the training box need not have the plugin: config/env_check.py runs with `finetune` unimportable
    res = _check(cpu_run, fake_site(tmp_path / "site"), standalone=True, FAKE_MISSING="finetune,rich")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[ok] trl: need ==1.16.0; found 1.16.0" in res.stdout  # plain table without rich


@pytest.mark.slow
def test_each_missing_piece_with_its_install_line(node_run, tmp_path):
    site = fake_site(tmp_path / "site", {"vllm": "0.30.0"})
    res = _check(node_run, site, FAKE_MISSING="trl,jsonschema,deepspeed", FAKE_GPUS="8")
    assert res.returncode == 1, res.stdout + res.stderr
    fixes = _fixes(res.stdout)
    assert fixes == {"trl": f"{PY} -m pip install trl==1.16.0",
                     "jsonschema": f"{PY} -m pip install jsonschema==4.26.0",
                     "deepspeed": f"{PY} -m pip install deepspeed==0.19.8"}, res.stdout
    assert "not ready: 3 problem(s)" in res.stdout


@pytest.mark.slow
def test_wrong_versions_and_too_few_small_gpus(node_run, tmp_path):
    site = fake_site(tmp_path / "site", {"vllm": "0.21.0", "deepspeed": "0.19.8", "trl": "1.17.0"})
    # four A100-40GB (compute capability 8.0) where the config was rendered for eight H100s (9.0)
    res = _check(node_run, site, FAKE_GPUS="4", FAKE_GPU_GIB="39.4", FAKE_GPU_CC="8.0")
    assert res.returncode == 1, res.stdout + res.stderr
    fixes = _fixes(res.stdout)
    assert fixes["trl"] == f"{PY} -m pip install trl==1.16.0"
    assert fixes["vllm"] == f"{PY} -m pip install vllm==0.30.0"  # the [train] pin, inside TRL's range
    assert "hardware.gpus: 4" in fixes["GPUs"] and "hardware.gpu_memory_gib: 39.4" in fixes["GPU memory"]
    assert "hardware.profile" in fixes["GPU compute capability"] and ">= 9.0 (h100-80gb, sm_90)" in res.stdout
    # vLLM 0.21 beside TRL 1.17: neither the TRL this config needs nor a known combination (no row: TRL != 1.16)
    assert set(fixes) == {"trl", "vllm", "GPUs", "GPU memory", "GPU compute capability"}


@pytest.mark.slow
def test_known_bad_combinations_name_their_upstream_issue(node_run, tmp_path):
    """transformers 5.1.0 beside DeepSpeed, and a vLLM newer than TRL 1.16 supports: each combination is a row
    naming the installed versions and the upstream report, with the install line of the validated versions."""
    site = fake_site(tmp_path / "site", {"vllm": "0.32.0", "deepspeed": "0.19.8", "transformers": "5.1.0"})
    res = _check(node_run, site, FAKE_GPUS="8")
    assert res.returncode == 1, res.stdout + res.stderr
    fixes = _fixes(res.stdout)
    assert fixes["versions transformers 5.1.0 + deepspeed 0.19.8"] == f"install the versions this config was " \
        f"validated with: {PY} -m pip install transformers==5.24.0"
    assert fixes["versions trl 1.16.0 + vllm 0.32.0"].endswith(f"{PY} -m pip install vllm==0.30.0")
    assert "huggingface/trl#4985" in res.stdout and "huggingface/trl#6732" in res.stdout


@pytest.mark.slow
def test_no_cuda_on_a_gpu_target(node_run, tmp_path):
    res = _check(node_run, fake_site(tmp_path / "site", {"vllm": "0.30.0", "deepspeed": "0.19.8"}))
    assert res.returncode == 1
    fixes = _fixes(res.stdout)
    assert set(fixes) == {"CUDA", "GPUs"} and "--index-url https://download.pytorch.org/whl/" in fixes["CUDA"]


@pytest.mark.slow
def test_ready_gpu_node(node_run, tmp_path):
    res = _check(node_run, fake_site(tmp_path / "site", {"vllm": "0.30.0", "deepspeed": "0.19.8"}), FAKE_GPUS="8",
                 FAKE_MISSING="rich")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[ok] GPUs used: need 8 of the 8 visible; found pins vLLM server on 0, training on 1," in res.stdout


@pytest.mark.parametrize(("visible", "count", "serve", "need", "says"), [
    (None, 8, 0, 1, "pins CUDA_VISIBLE_DEVICES=0; 7 idle (1,2,3,4,5,6,7)"),
    ("4,5,6,7", 4, 0, 1, "pins CUDA_VISIBLE_DEVICES=4; 3 idle (5,6,7)"),  # a scheduler's choice is narrowed
    (None, 8, 1, 8, "pins vLLM server on 0, training on 1,2,3,4,5,6,7"),
    (None, 2, 0, 2, "pins CUDA_VISIBLE_DEVICES=0,1")])
def test_env_check_says_which_gpus_the_layout_uses(monkeypatch, visible, count, serve, need, says):
    from finetune.env.check import gpu_use

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu_use({"gpus_per_node": need, "vllm_gpus": serve, "nodes": 1}, count) == says


def _arch_rows(profile: str, caps, archs, cuda):
    from finetune.env.check import check_gpu_arch
    from finetune.hardware import PROFILES, gpu_requirements

    return {r.what: r for r in check_gpu_arch(gpu_requirements(PROFILES[profile]), caps, archs, cuda, "2.13.0")}


def test_every_gpu_profile_is_held_to_its_own_capability_and_cuda():
    """A profile added to the registry reaches env check through target.json's hardware.gpu, no edit here: its own
    card on a build of its oldest CUDA carrying its kernels is ready; an older card or CUDA is not."""
    from finetune.hardware import PROFILES

    for p in (p for p in PROFILES.values() if not p.is_cpu):
        (major, minor), cuda = p.compute_capability, p.min_cuda
        rows = _arch_rows(p.name, [(major, minor)] * 2, [f"sm_{major}{minor}"], cuda)
        assert all(r.ok for r in rows.values()), (p.name, rows)
        older = _arch_rows(p.name, [(major, minor), (major - 1, 0)], [f"sm_{major}{minor}"], "11.0" if
                           cuda != "11.0" else "10.2")
        assert not older["GPU compute capability"].ok and "hardware.profile" in older["GPU compute capability"].fix
        assert not older["CUDA for the GPU"].ok and "--index-url" in older["CUDA for the GPU"].fix


@pytest.mark.parametrize(("caps", "archs", "missing"), [
    ([(10, 0)], ["sm_80", "sm_90"], "sm_100"),  # a B200 under a build without Blackwell kernels
    ([(10, 0)], ["sm_80", "compute_90"], None),  # PTX JIT-compiles on a newer card
    ([(8, 9)], ["sm_80", "sm_86"], None),  # a cubin runs on a higher minor of its major
    ([(9, 0)], ["sm_80", "sm_86", "sm_89"], "sm_90"),  # ... never across majors
    ([(9, 0)], [], "sm_90")])
def test_torch_kernels_follow_cudas_binary_compatibility(caps, archs, missing):
    row = _arch_rows("a100-40gb", caps, archs, "12.8")["torch kernels"]
    assert row.ok is (missing is None)
    assert missing is None or missing in row.fix and "--force-reinstall" in row.fix


def test_no_target_is_bad_input(tmp_path):
    res = subprocess.run([PY, "-m", "finetune", "env", "check", str(tmp_path)], env=base_env(), capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "no config/target.json" in res.stderr and "finetune config render" in res.stderr


@pytest.mark.parametrize("version,require,ok", [
    ("2.13.0+cu128", "==2.13.0", True), ("0.31.0", ">=0.22.0,<=0.31.0", True), ("0.31.1", "<=0.31.0,>=0.22.0", False),
    ("0.21.9", ">=0.22.0,<=0.31.0", False), ("1.16", "==1.16.0", True), ("1.16.0rc1", "==1.16.0", True)])
def test_version_specifiers(version, require, ok):
    from finetune.env.check import satisfies

    assert satisfies(version, require) is ok


@pytest.mark.slow
def test_a_hub_model_neither_cached_nor_reachable_is_missing(node_run, tmp_path):
    res = _check(node_run, standalone=True, HF_HUB_CACHE=str(tmp_path / "empty-cache"))
    assert res.returncode == 1
    fix = _fixes(res.stdout)["model"]
    assert "huggingface-cli download Qwen/Qwen3-1.7B" in fix and "HF_HUB_OFFLINE" in fix
    assert "fix training data" not in res.stdout  # data/train.jsonl is where train.py reads it
