"""Sampling where the GPU is: `inspect sample --emit-requests` → the emitted script run with a fake vLLM (the
tiny model behind vLLM's offline API) → `--import` gives the same rows as sampling here; import honours
``dataset.prompt_column``; the format is documented where users look."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_sample_local import _lines, _run

# vLLM's offline API as the emitted script uses it, backed by transformers and the tiny model. It records the
# token ids it was given so the test can compare them with what the local sampler feeds the model.
FAKE_VLLM = textwrap.dedent('''
    import json, os
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer


    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)


    class LLM:
        def __init__(self, model, seed, max_model_len):
            self.tok = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForCausalLM.from_pretrained(model).eval()
            torch.manual_seed(seed)

        def generate(self, prompts, params, use_tqdm=False):
            with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
                for p in prompts:
                    log.write(json.dumps({"ids": p["prompt_token_ids"], "n": params.n,
                                          "temperature": params.temperature}) + "\\n")
            eos = self.tok.eos_token_id
            outs = []
            for p in prompts:
                ids = torch.tensor([p["prompt_token_ids"]])
                gen = self.model.generate(ids, do_sample=True, temperature=params.temperature,
                                          top_p=params.top_p, max_new_tokens=params.max_tokens,
                                          num_return_sequences=params.n, pad_token_id=eos, eos_token_id=eos)
                group = []
                for seq in gen[:, ids.shape[1]:].tolist():
                    kept = seq[:seq.index(eos)] if eos in seq else seq
                    group.append(SimpleNamespace(text=self.tok.decode(kept, skip_special_tokens=True),
                                                 token_ids=kept, finish_reason="stop" if eos in seq else "length"))
                outs.append(SimpleNamespace(outputs=group))
            return outs
''')

KEYS = ("id", "row", "prompt", "conversational", "columns")


def _fake_vllm(tmp_path: Path) -> Path:
    pkg = tmp_path / "fake-vllm" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_VLLM)
    return pkg.parent


@pytest.mark.slow
def test_emit_sample_elsewhere_import_round_trip(cli, tiny_model_dir, tmp_path):
    run = _run(tmp_path, tiny_model_dir, system=", system_prompt: 'Answer in <answer></answer>.'")
    r = cli("inspect", "sample", run / "spec.yaml", "--emit-requests")
    assert r.code == 0, r.err
    req_dir = run / "requests"
    assert sorted(p.name for p in req_dir.iterdir()) == ["README.md", "base_requests.jsonl", "requests.jsonl",
                                                          "sample_vllm.py"]
    assert not (run / "samples.jsonl").exists()  # nothing sampled here
    assert "--import" in r.out and "README.md" in r.out

    # the GPU machine: the emitted script, unchanged, with vLLM's offline API
    log = tmp_path / "fake-vllm.log"
    env = {**os.environ, "PYTHONPATH": str(_fake_vllm(tmp_path)), "FAKE_VLLM_LOG": str(log)}
    for src, dst in (("requests.jsonl", "samples.jsonl"), ("base_requests.jsonl", "base_samples.jsonl")):
        done = subprocess.run([sys.executable, str(req_dir / "sample_vllm.py"), str(req_dir / src), "-o",
                               str(req_dir / dst), "--model", str(tiny_model_dir)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    # back here: the README's import line, as printed
    readme = (req_dir / "README.md").read_text()
    import_line = next(ln for ln in readme.splitlines() if " inspect sample " in ln and "--import" in ln)
    done = subprocess.run(["bash", "-c", import_line], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    imported, imported_base = _lines(run / "samples.jsonl"), _lines(run / "base_samples.jsonl")

    # the same spec sampled directly here
    direct_run = tmp_path / "direct"
    direct_run.mkdir()
    for name in ("spec.yaml", "data.jsonl"):
        (direct_run / name).write_text((run / name).read_text())
    assert cli("inspect", "sample", direct_run / "spec.yaml").code == 0
    direct, direct_base = _lines(direct_run / "samples.jsonl"), _lines(direct_run / "base_samples.jsonl")

    assert [{k: s[k] for k in KEYS} for s in imported] == [{k: s[k] for k in KEYS} for s in direct]
    assert [{k: s[k] for k in KEYS} for s in imported_base] == [{k: s[k] for k in KEYS} for s in direct_base]
    assert all(isinstance(s["completion"], str) and s["source"] == "vllm" for s in imported)

    # the fake vLLM was fed exactly the token ids the local sampler feeds the model, at the spec's temperatures
    from finetune.inspect.sample import _TransformersSampler
    from finetune.spec import load_spec

    spec = load_spec(run / "spec.yaml")
    local = _TransformersSampler(str(tiny_model_dir), "cpu", spec.generation.max_prompt_length)
    requests = _lines(req_dir / "requests.jsonl") + _lines(req_dir / "base_requests.jsonl")
    fed = _lines(log)
    assert len(fed) == len(requests)
    for req, got in zip(requests, fed):
        text = local.text(req)
        assert req["prompt_text"] == text and "Answer in <answer></answer>." in text
        assert got["ids"] == local.tok(text, add_special_tokens=False)["input_ids"]
    assert {f["temperature"] for f in fed} == {spec.generation.temperature, spec.inspection.base_success.temperature}

    # and the imported samples score like any others
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0


def test_import_honours_prompt_column(cli, tmp_path):
    run = _run(tmp_path, "unused-model")
    spec = (run / "spec.yaml").read_text().replace("prompt_column: prompt", "prompt_column: question")
    (run / "spec.yaml").write_text(spec)
    data = (run / "data.jsonl").read_text().replace('"prompt":', '"question":')  # the dataset has that column too
    (run / "data.jsonl").write_text(data)
    rows = [{"question": "What is 1 plus 1?", "completion": "<answer>2</answer>", "answer": "2"},
            {"question": "What is 2 plus 2?", "completion": "<answer>5</answer>", "answer": "4"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = cli("inspect", "sample", run / "spec.yaml", "--import", tmp_path / "in.jsonl")
    assert r.code == 0, r.err
    got = _lines(run / "samples.jsonl")
    assert [s["prompt"] for s in got] == ["What is 1 plus 1?", "What is 2 plus 2?"]
    assert [s["columns"] for s in got] == [{"answer": "2"}, {"answer": "4"}]  # the prompt is not a column too


def test_emit_and_import_together_is_bad_input(cli, tmp_path):
    run = _run(tmp_path, "unused-model")
    r = cli("inspect", "sample", run / "spec.yaml", "--emit-requests", "--import", tmp_path / "x.jsonl")
    assert r.code == 2 and "--emit-requests" in r.err
    assert not (run / "requests").exists()


def test_the_formats_are_documented():
    help_text = subprocess.run([sys.executable, "-m", "finetune", "inspect", "sample", "--help"], capture_output=True,
                               text=True, timeout=120)
    assert help_text.returncode == 0, help_text.stderr
    reference = (Path(__file__).resolve().parents[2] / "references" / "reward-functions.md").read_text()
    for needle in ("--emit-requests", "prompt_token_ids", "dataset.prompt_column", "trl vllm-serve", '"completion"',
                   "multi-turn rollout", '"tool_calls"', '{"role": "tool", "name", "content"}'):
        assert needle in " ".join(help_text.stdout.split()), needle
    for needle in ("--emit-requests", "prompt_token_ids", "dataset.prompt_column", "--import"):
        assert needle in reference, needle


@pytest.mark.slow  # a fresh interpreter imports transformers: ~5 s alone, far more on a loaded box
def test_emit_reads_a_cached_hub_tokenizer_without_the_network(tiny_model_dir, tmp_path):
    """--emit-requests on a box without network: a hub id in the cache loads from the cache and asks the hub for
    none of its files (transformers asked first, and retried for ~50 s where the hub hangs)."""
    import socket
    import threading

    from hfcache_helpers import HUB_REPO_ID, install_in_hf_cache

    install_in_hf_cache(tiny_model_dir, tmp_path / "hub", HUB_REPO_ID)
    hub = socket.create_server(("127.0.0.1", 0))
    asked: list[str] = []

    def serve() -> None:  # records each request line, answers nothing (a hub that is not there)
        while True:
            try:
                conn, _ = hub.accept()
            except OSError:
                return
            with conn:
                asked.append(conn.recv(4096).decode("latin-1").split("\r\n")[0])

    threading.Thread(target=serve, daemon=True).start()
    code = ("from pathlib import Path\nfrom types import SimpleNamespace\n"
            "from finetune.inspect.sample_remote import _tokenizer\n"
            f"spec = SimpleNamespace(model={HUB_REPO_ID!r}, resolve_path=lambda m: Path({str(tmp_path)!r}) / m)\n"
            "print(type(_tokenizer(spec)).__name__)\n")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HOME": str(tmp_path / "home"),
           "HF_ENDPOINT": f"http://127.0.0.1:{hub.getsockname()[1]}", "HF_HUB_OFFLINE": "0",
           "TRANSFORMERS_OFFLINE": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    hub.close()
    assert done.returncode == 0 and "Tokenizer" in done.stdout, done.stderr[-2000:]
    # huggingface_hub's one agent-registry fetch (3 s timeout) may come; no request for the model's files
    assert not [line for line in asked if HUB_REPO_ID in line], asked


def test_a_rollout_in_the_documented_shape_imports_whole():
    """The message list `--help` shows for a multi-turn rollout is what the import keeps as a trajectory."""
    from finetune.inspect.samplesio import normalise_row

    rollout = [{"role": "assistant", "content": "", "tool_calls": [
                   {"type": "function", "function": {"name": "run_sql", "arguments": {"query": "SELECT 1"}}}]},
               {"role": "tool", "name": "run_sql", "content": "[(1,)]"},
               {"role": "assistant", "content": "1"}]
    row = normalise_row({"prompt": [{"role": "user", "content": "One?"}], "completion": rollout}, "t", 0)
    assert row["trajectory"] == rollout
    assert "<tool_call>" in row["completion"] and "run_sql" in row["completion"]


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": ""}])
def test_hub_id_without_a_local_tokenizer_is_refused_at_once(cli, tmp_path, monkeypatch, env):
    """Offline (declared, or the hub unreachable: a closed local port), a hub id not in the cache is one line
    naming the --import way, within seconds (no retry loop), and nothing is written."""
    import time

    import huggingface_hub.constants

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    run = _run(tmp_path, "nobody-here/not-a-cached-model")
    start = time.monotonic()
    r = cli("inspect", "sample", run / "spec.yaml", "--emit-requests")
    assert r.code == 2 and "Traceback" not in r.err, r
    assert "nobody-here/not-a-cached-model" in r.err and "--import" in r.err, r.err
    # huggingface_hub's download retries took ~55 s; the bound leaves room for a first transformers import on a
    # loaded box (14 s seen under -n 2)
    assert time.monotonic() - start < 40
    assert not (run / "requests").exists()


@pytest.mark.slow  # rewards render + emit with the environment's sandboxed host (~16 s on a shared box)
def test_emitted_requests_of_an_environment_carry_its_tools(cli, tmp_path):
    """For a spec environment each request's prompt is rendered with the tools' JSON schemas, exactly as the
    local rollout starts it (RolloutSampler._start: the chat template with tools=); the emitted sampler, which has
    no tool loop, refuses such a request in one line instead of writing single-turn answers training never sees."""
    import yaml

    from finetune.demo import tools as demo_tools
    from finetune.inspect.rewardmod import load_rewards
    from finetune.inspect.rollout import RolloutSampler
    from finetune.tinymodel import build_tokenizer

    tok_dir = tmp_path / "tok"
    tok = build_tokenizer(tools=True)
    tok.save_pretrained(tok_dir)
    run = tmp_path / "run"
    run.mkdir()
    rows = demo_tools.rows(4, seed=1)
    (run / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "env.py").write_text(demo_tools.ENV_SOURCE)
    (run / "spec.yaml").write_text(yaml.safe_dump({
        "name": "t", "model": str(tok_dir), "dataset": {"path": "data.jsonl", "prompt_column": "prompt"},
        "environment": {"file": "env.py", "class": demo_tools.ENV_CLASS},
        "rewards": [{"name": "solved", "type": "environment"}],
        "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
        "generation": {"max_prompt_length": 512, "max_completion_length": 64},
        "inspection": {"prompts": 2, "per_prompt": 1, "min_read": 50, "held_back_prompts": 0,
                       "base_success": {"prompts": 1, "samples_per_prompt": 1}}}, sort_keys=False))
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    r = cli("inspect", "sample", run / "spec.yaml", "--emit-requests")
    assert r.code == 0, r.err
    reqs = _lines(run / "requests" / "requests.jsonl")
    module = load_rewards(run).module
    local = RolloutSampler(None, tok, module.environment_factory, module.environment_tools, 4, 64)
    for req in reqs:
        assert [t["function"]["name"] for t in req["tools"]] == ["add"]
        assert req["prompt_token_ids"] == local._start(req["prompt"], req["columns"]).prompt_ids
        assert "<tools>add(a: integer, b: integer)</tools>" in req["prompt_text"]  # the tiny template's rendering
    done = subprocess.run([sys.executable, str(run / "requests" / "sample_vllm.py"), str(run / "requests" /
                           "requests.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--model", str(tok_dir)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "no tool loop" in done.stderr and "--import" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out.jsonl").exists()
