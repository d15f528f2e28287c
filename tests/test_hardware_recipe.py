"""A GPU profile added exactly as DESIGN.md's recipe says reaches every reader of the profile table.

The recipe is followed in a scratch copy of the package: one ``GpuProfile(...)`` line in ``hardware.py``'s
entries and nothing else. The product then runs on that copy in a child process: ``finetune memory --profile``
and a spec's ``hardware.profile`` resolve it and estimate on its memory, ``--help`` lists it, and ``finetune
docs`` regenerates references/grpo-memory.md (and nothing else) with its row. Beside it, the completeness
checks: an entry with a missing or invalid field is refused in one line naming its line in hardware.py,
whichever command reads the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scratch_repo import checks, copy_repo, failed

from finetune import hardware
from finetune.errors import RegistryError

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = '        GpuProfile("cpu", '  # the dummy goes before the cpu profile, as a new GPU would
DUMMY = ('        GpuProfile("recipe-gpu-32gb", "Recipe dummy GPU 32GB", 31.5, 1200, True, (10, 0), "12.8", '
         'node_gpus=4),\n')
ROW = "| `recipe-gpu-32gb` | Recipe dummy GPU 32GB | 31.5 GiB | 1200 GB/s | yes | 10.0 | 12.8 |  |"

SPEC = """\
name: profile-recipe
model: Qwen/Qwen2.5-7B
dataset: {path: data.jsonl}
rewards:
  - {name: format_ok, type: format, pattern: answer_tag, weight: 0.2}
hardware: {profile: recipe-gpu-32gb, gpus: 2}
"""

# One interpreter runs every command on the copy (each is `finetune.cli.main`, as the console script calls it).
CHILD = """
import contextlib, io, json, sys
from finetune.cli import main

out = []
for argv in json.loads(sys.argv[1]):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:  # --help
            code = exc.code
    out.append({"code": code, "out": stdout.getvalue(), "err": stderr.getvalue()})
print(json.dumps(out))
"""


def _scratch(tmp: Path, entry: str) -> Path:
    """A plugin root whose hardware.py has ``entry`` added to its profiles (the recipe's one file)."""
    copy_repo(tmp)
    path = tmp / "scripts" / "finetune" / "hardware.py"
    text = path.read_text(encoding="utf-8")
    assert text.count(ANCHOR) == 1
    path.write_text(text.replace(ANCHOR, entry + ANCHOR), encoding="utf-8")
    return tmp


def _run(root: Path, *commands: list[str]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(root / "scripts")}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(commands)], capture_output=True, text=True,
                          env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow  # a fresh interpreter on the copy: the memory model, two estimates, every generated doc, ruff, mypy
def test_a_profile_added_as_the_recipe_says_is_resolved_estimated_and_documented(tmp_path: Path) -> None:
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    recipe = design[design.index("### A GPU profile"):design.index("### A diagnose symptom")]
    assert "- Files: `scripts/finetune/hardware.py`\n" in recipe and "`GpuProfile(name, label, memory_gib" in recipe
    root = _scratch(tmp_path / "plugin", DUMMY)
    (tmp_path / "spec.yaml").write_text(SPEC, encoding="utf-8")
    flag, spec, helped, docs, check = _run(
        root, ["memory", "--model", "Qwen/Qwen2.5-7B", "--profile", "recipe-gpu-32gb", "--json"],
        ["memory", str(tmp_path / "spec.yaml"), "--json"], ["memory", "--help"], ["docs", "--root", str(root)],
        ["docs", "--check", "--root", str(root)])
    for result, hardware_line in ((flag, "recipe-gpu-32gb (31.5 GiB per GPU)"),
                                  (spec, "2×recipe-gpu-32gb (31.5 GiB per GPU)")):
        assert result["code"] == 0, result["err"]
        estimate = json.loads(result["out"])["estimate"]
        assert estimate["hardware"] == hardware_line and estimate["memory_gib"] == 31.5
        assert estimate["verdict"] in {"fits", "tight", "does not fit"} and estimate["total_gib"] > 0
    assert (tmp_path / "memory.md").is_file()  # the spec's run directory got its memory.md
    assert helped["code"] == 0 and "recipe-gpu-32gb" in " ".join(helped["out"].split())
    # what the recipe calls regenerated is regenerated, and nothing else
    assert docs["code"] == 0, docs["out"] + docs["err"]
    assert [line for line in docs["out"].splitlines() if "regenerated" in line] == [
        "references/grpo-memory.md: regenerated"]
    doc = (root / "references" / "grpo-memory.md").read_text(encoding="utf-8")
    assert ROW in doc
    # the per-scale tables (memory.doc.doc_hardware: every profile, on one GPU and on its node_gpus) include it
    for title in ("**recipe-gpu-32gb (31.5 GiB per GPU)**", "**4×recipe-gpu-32gb (31.5 GiB per GPU)**"):
        assert doc.count(title) == doc.count("**h100-80gb (79.6 GiB per GPU)**") > 0, title
    assert check["code"] == 0, check["out"] + check["err"]
    # what env check holds the box to (config/target.json's hardware.gpu): the new entry's CUDA facts
    probe = subprocess.run([sys.executable, "-c", "import json; from finetune.hardware import PROFILES, "
                            "gpu_requirements; print(json.dumps(gpu_requirements(PROFILES['recipe-gpu-32gb'])))"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root / "scripts")},
                           timeout=60)
    assert json.loads(probe.stdout) == {"profile": "recipe-gpu-32gb", "compute_capability": [10, 0],
                                        "arch": "sm_100", "min_cuda": "12.8"}, probe.stderr
    assert not failed(checks(root))  # ruff, mypy and the structure tests on the copy


def test_an_incomplete_profile_is_refused_in_one_line_by_the_commands(tmp_path: Path) -> None:
    """A missing field (no ``min_cuda``): no traceback, exit 2, one line naming the entry's line in hardware.py."""
    root = _scratch(tmp_path, DUMMY.replace(', "12.8", node_gpus=4)', ")"))
    line = 1 + next(i for i, text in enumerate((root / "scripts" / "finetune" / "hardware.py").read_text(
        encoding="utf-8").splitlines()) if "recipe-gpu-32gb" in text)
    for result in _run(root, ["memory", "--model", "Qwen/Qwen2.5-7B", "--profile", "h100-80gb"], ["docs", "--check"]):
        err = result["err"]
        assert result["code"] == 2 and result["out"] == "" and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: {root}/scripts/finetune/hardware.py:{line}: a GPU profile entry: ")
        assert "missing 1 required positional argument: 'min_cuda'" in err and "fix: give every field" in err


# ----------------------------------------------------------------------------------- completeness --

CC, CUDA = (10, 0), "12.8"


def _entries_with(*extra: hardware.GpuProfile) -> dict[str, hardware.GpuProfile]:
    base = hardware._entries()
    return hardware._table(lambda: (*base, *extra))


@pytest.mark.parametrize(("entry", "problem"), [
    (hardware.GpuProfile("h100-80gb", "Again", 80.0, 3350, True, CC, CUDA), "registered twice"),
    (hardware.GpuProfile("Recipe-GPU", "Recipe", 32.0, 1200, True, CC, CUDA), "not a lower-case profile name"),
    (hardware.GpuProfile("recipe gpu", "Recipe", 32.0, 1200, True, CC, CUDA), "not a lower-case profile name"),
    (hardware.GpuProfile("recipe-gpu", "", 32.0, 1200, True, CC, CUDA), "label '' is not one line"),
    (hardware.GpuProfile("recipe-gpu", "A | B", 32.0, 1200, True, CC, CUDA), "is not one line"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 0.0, 1200, True, CC, CUDA), "memory_gib=0 on a GPU"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, float("nan"), True, CC, CUDA), "bandwidth_gbs=nan is not a finite"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", "32", 1200, True, CC, CUDA), "memory_gib='32' is not a finite"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, "yes", CC, CUDA), "bf16='yes' is not True or False"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, True, CC, CUDA, note="a\nb"),
     "note 'a\\nb' is not one line"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, True, None, CUDA), "compute_capability=None is not"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, True, (9, "0"), CUDA), "is not a (major, minor)"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, True, CC, "twelve"), "min_cuda='twelve' is not"),
    (hardware.GpuProfile("recipe-gpu", "Recipe", 32.0, 1200, True, CC, CUDA, node_gpus=0), "node_gpus=0 is not"),
    (hardware.GpuProfile("cpu2", "Recipe", 0.0, 0.0, False, CC, CUDA, is_cpu=True), "the cpu profile has no"),
])
def test_an_invalid_entry_is_refused_naming_its_field(entry: hardware.GpuProfile, problem: str) -> None:
    with pytest.raises(RegistryError) as err:
        _entries_with(entry)
    assert problem in err.value.what and err.value.what.startswith(f"GPU profile {entry.name!r}: ")
    assert "\n" not in str(err.value) and "fix: write it as GpuProfile(name, label, memory_gib" in str(err.value)


def test_every_shipped_profile_is_valid_and_looked_up_by_its_name() -> None:
    assert _entries_with() == hardware.PROFILES and list(hardware.PROFILES) == [p.name for p in hardware._entries()]
    for name, profile in hardware.PROFILES.items():
        assert hardware._problem(profile) is None and hardware.get_profile(name.upper()) is profile
