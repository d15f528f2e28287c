"""The spec loader refuses hostile YAML and every numeric CLI option is range-checked.

Each case: exit 2, one line naming where, no traceback, nothing written.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SPEC = """\
name: mem-test
model: Qwen/Qwen2.5-7B
dataset: {path: data.jsonl}
rewards:
  - {name: format_ok, type: format, pattern: answer_tag, weight: 0.2}
hardware: {profile: rtx-4090-24gb, gpus: 1}
generation: {max_prompt_length: 256, max_completion_length: 512, temperature: 1.0}
"""

LAUGHS = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))

HOSTILE_SPECS = {
    "temperature_inf": (SPEC.replace("temperature: 1.0", "temperature: .inf"), ":7", "not a finite number"),
    "temperature_overflow": (SPEC.replace("temperature: 1.0", "temperature: 1.0e+999"), ":7", "not a finite number"),
    "temperature_nan_string": (SPEC.replace("temperature: 1.0", "temperature: 'nan'"), ":7", "finite number"),
    "gpu_memory_inf": (SPEC.replace("gpus: 1}", "gpus: 1, gpu_memory_gib: .inf}"), ":6", "not a finite number"),
    "weight_inf": (SPEC.replace("weight: 0.2", "weight: .Inf"), ":5", "not a finite number"),
    "duplicate_key": (SPEC + "name: again\n", ":8", "duplicate key 'name'"),
    "anchor": (SPEC.replace("dataset: {", "dataset: &d {"), ":3", "anchors and aliases"),
    "recursive_alias": (SPEC + "extra: &x [*x]\n", ":8", "anchors and aliases"),
    "billion_laughs": (SPEC + LAUGHS, ":8", "anchors and aliases"),
    "deep_nesting": (SPEC + "extra: " + "[" * 70 + "]" * 70 + "\n", ":8", "nested deeper than 64"),
    "too_large": (SPEC + "# " + "x" * (1 << 20) + "\n", "spec.yaml", "file too large"),
    "not_utf8": (SPEC.replace("mem-test", "mem-\udcff"), "spec.yaml", "not UTF-8"),
}


def _write(path, text):
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("verb", [("memory",), ("rewards", "render")], ids=["memory", "rewards-render"])
@pytest.mark.parametrize("case", sorted(HOSTILE_SPECS))
def test_hostile_spec_is_one_line_exit_2_nothing_written(cli, tmp_path, case, verb):
    text, where, message = HOSTILE_SPECS[case]
    _write(tmp_path / "spec.yaml", text)
    r = cli(*verb, tmp_path / "spec.yaml")
    assert r.code == 2 and message in r.err and where in r.err, r
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


def test_billion_laughs_is_refused_fast_in_a_real_process(tmp_path):
    """A 1.7 KB YAML bomb used to run past 60 s and 8 GB; now it is refused before expansion."""
    _write(tmp_path / "spec.yaml", SPEC + LAUGHS)
    r = subprocess.run([sys.executable, "-m", "finetune", "memory", str(tmp_path / "spec.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "anchors and aliases" in r.stderr and "Traceback" not in r.stderr


def test_the_plain_spec_still_loads(cli, tmp_path):
    _write(tmp_path / "spec.yaml", SPEC)
    assert cli("memory", tmp_path / "spec.yaml").code == 0


BAD_OPTIONS = [
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--gpu-memory-gib", "-5"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--gpu-memory-gib", "nan"), "not a finite number"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--gpu-memory-gib", "inf"), "not a finite number"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--gpu-memory-gib", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--num-generations", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--num-generations", "1"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--batch", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--batch", "1.5"), "not a whole number"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--accumulation", "-1"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--gpus", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--nodes", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--vllm-gpus", "-1"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--max-prompt-length", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--max-completion-length", "-3"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--beta", "-0.1"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--beta", "nan"), "not a finite number"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--vllm-util", "1.5"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--vllm-util", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--tp", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--lora-r", "0"), "out of range"),
    (("memory", "--model", "Qwen/Qwen2.5-7B", "--zero", "1"), "invalid choice"),
    (("demo", "--seeds", "0"), "out of range"),
    (("demo", "--steps", "-1"), "out of range"),
    (("inspect", "review", "{run}", "-n", "0"), "out of range"),
]


@pytest.mark.parametrize("args,message", BAD_OPTIONS, ids=[" ".join(a[-2:]) for a, _ in BAD_OPTIONS])
def test_numeric_options_are_range_checked(cli, tmp_path, args, message):
    r = cli(*[a.format(run=tmp_path) for a in args])
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r
    assert list(tmp_path.iterdir()) == []


def test_finite_float_type_refuses_non_finite():
    from pydantic import TypeAdapter, ValidationError

    from finetune.fieldtypes import FiniteFloat

    assert TypeAdapter(FiniteFloat).validate_python(1.5) == 1.5
    for bad in (float("inf"), float("nan"), "inf"):
        with pytest.raises(ValidationError):
            TypeAdapter(FiniteFloat).validate_python(bad)
