"""The moments a GRPO run dies at for memory, each sized from what the installed libraries do at that moment.

A layout fits only when every moment fits; the steady-state peak alone says nothing about start-up.

- **load** — the policy as loaded when TRL 1.16's ``GRPOTrainer.__init__`` builds the colocated vLLM engine
  (``VLLMGeneration._init_vllm``): a bitsandbytes-quantized model loads whole on every rank, because transformers
  skips ``deepspeed.zero.Init`` for a quantized model (modeling_utils ``get_init_context``: zero.Init only ``if not
  is_quantized``; the bnb quantizer's ``update_device_map`` puts it on the current GPU); an unquantized one under
  ZeRO-3 is partitioned at load; under ZeRO-2 it stays on the CPU until ``deepspeed.initialize`` (Trainer sets
  ``place_model_on_device`` False when DeepSpeed is enabled); plain DDP moves it to the GPU first (Trainer
  ``_move_model_to_device``); one process loads it there (``device_map="auto"``). vLLM then refuses to start unless
  ``gpu_memory_utilization × total`` is still free (vllm/v1/worker/utils.py ``request_memory``: "Free memory on
  device ... is less than desired GPU memory utilization").
- **engine** — vLLM's engine inside its share: weights, the profile run's activations, non-torch overhead and KV
  space for at least one full-length sequence (colocate), or 16 of them (a server, sized to serve every training
  process).
- **sync** — a weight sync into vLLM (the first one runs before the first generation, every round after): TRL 1.16's
  PEFT branch (trl/generation/vllm_generation.py ``_iter_named_params``) gathers *every* parameter at once under
  ZeRO-3 (``gather_params(list(model.parameters()))``) before merging the adapters; the non-PEFT branch gathers one
  parameter at a time; server mode walks the parameters twice on the first sync (``sync_weights``: their metadata,
  then the stream). Sleep mode wakes the engine's weights for it (``wake_up(tags=["weights"])``).
- **step** — the steady-state step: the larger of the generation and the training phase.

:data:`SOURCES` ties each rule to the installed TRL and transformers by a hash of the functions it stands on:
tests/memory/test_moments.py fails when a version not listed there is installed, or a listed function's source
differs (a TRL that gathers PEFT parameters one at a time — TRL PR #5766 — must be re-read, not trusted).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import textwrap
from importlib import metadata
from pathlib import Path

from finetune.memory.formulas import CUDA_CONTEXT_GIB, QLORA_BYTES_PER_PARAM, SERVER_MIN_SEQS, gib, kv_cache_bytes
from finetune.memory.result import Moment
from finetune.memory.sizing import Parts, Sizing

# The functions each moment's rule reads, and the sha256 of their source (dedented) as the rule was checked against
# it, per installed package version. A version not listed, or a digest that differs, means: re-read the function,
# re-check the rule here, then record the new digest.
SOURCES: dict[str, dict[str, str]] = {
    "trl==1.16.0": {
        # sync: PEFT gathers every parameter at once under ZeRO-3, non-PEFT one at a time
        "trl.generation.vllm_generation:VLLMGeneration._iter_named_params":
            "434a0e99f01142079c0546196c0e966db09b8c07424487672a12f30828e9f713",
        # load: the colocated engine starts in GRPOTrainer.__init__, bitsandbytes for a 4-bit policy
        "trl.generation.vllm_generation:VLLMGeneration._init_vllm":
            "227d37699d5c16f7ac1e59dce69949d556b998639186c3a6a09017c1a68abd07",
        # sync: server mode walks the parameters twice on the first sync; sleep mode wakes the weights
        "trl.generation.vllm_generation:VLLMGeneration.sync_weights":
            "2c6dc411855c686b9b3379c6c8c3d41f8715c374108b601e237e458b3e53d087",
        "trl.distributed:DistributedBackend.gather_params":
            "900c236966ba9d828575e9173c5c9869cd66ff85c326a66c6e46127ddd289dd7",
    },
    "transformers==5.24.0": {
        # load: zero.Init only for an unquantized model
        "transformers.modeling_utils:PreTrainedModel.get_init_context":
            "ebd1c65ec1b2037f665acd40f8b8eabf98300f6f156a91a7207abdb50ec80752",
        # load: no placement on the GPU when DeepSpeed is enabled (ZeRO-2 leaves the policy on the CPU)
        "transformers.trainer:Trainer.__init__":
            "97428fb339e512a2cc9e675dcc0044ac0e02262149ca77ee874cea3b8433ecdd",
    },
}


def source_digest(target: str) -> str:
    """sha256 of the dedented source of ``module:Qualified.name``, read from the installed file without importing it
    (importing TRL's generation module costs seconds)."""
    module, _, qualname = target.partition(":")
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level name: found without importing anything
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    text = Path(spec.origin).parent.joinpath(*rest[:-1], f"{rest[-1]}.py").read_text(encoding="utf-8")
    body: list[ast.stmt] = ast.parse(text).body
    found: list[ast.stmt] = []
    for part in qualname.split("."):
        found = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == part]
        if not found:
            raise AttributeError(f"{module} has no {qualname}")
        body = found[0].body  # type: ignore[attr-defined]
    segment = ast.get_source_segment(text, found[0], padded=True) or ""
    return hashlib.sha256(textwrap.dedent(segment).encode("utf-8")).hexdigest()


def source_drift(sources: dict[str, dict[str, str]] | None = None) -> list[str]:
    """What no longer matches the source the moments were checked against: an installed TRL / transformers with no
    entry, or a function whose source changed (one line each)."""
    table = SOURCES if sources is None else sources
    out = []
    for package in sorted({key.partition("==")[0] for key in table}):
        installed = f"{package}=={metadata.version(package)}"
        if installed not in table:
            checked = sorted(k for k in table if k.startswith(package + "=="))
            out.append(f"{installed}: the memory moments were checked against {checked}, not this version")
            continue
        for target, digest in table[installed].items():
            if source_digest(target) != digest:
                out.append(f"{installed}: {target} changed since the moments were checked against it")
    return out


def policy_bytes(s: Sizing) -> float:
    """The whole policy in the dtype it is stored in (NF4 linears + bf16 rest under QLoRA)."""
    m = s.model
    if s.k.method == "qlora":
        return m.quantizable_params * QLORA_BYTES_PER_PARAM + (m.params - m.quantizable_params) * 2
    return (2 if s.k.method == "full" and s.layout.zero_stage else s.wbytes) * m.params


def _loaded(s: Sizing, parts: Parts) -> tuple[float, str]:
    """GiB on the GPU when the engine starts (or, in server mode, when training starts), and how it got there."""
    whole, k = gib(policy_bytes(s)), s.k
    if k.method == "qlora":
        policy, how = whole, ("4-bit policy loaded whole on every rank (no zero.Init for a quantized model)"
                              if s.zero3 else "4-bit policy loaded whole")
    elif s.zero3:
        policy, how = whole / s.shards, f"policy partitioned at load by zero.Init (/ {s.shards})"
    elif s.layout.zero_stage and s.n_train > 1:
        policy, how = 0.0, "policy on the CPU until deepspeed.initialize (ZeRO-2)"
    else:
        policy, how = whole, "policy loaded whole" + (" (DDP places it first)" if s.n_train > 1 else "")
    ref = parts.gib_of("reference_model")
    if ref and s.n_train > 1 and not s.zero3:
        ref = 0.0  # device_map=None under DDP / DeepSpeed: on the CPU until accelerate prepares it, after the engine
    loaded = policy + ref + parts.gib_of("adapters") + (0.0 if s.cpu else CUDA_CONTEXT_GIB)
    return loaded, how + (f" + reference {ref:.1f}" if ref else "") + " + CUDA context"


def _load(s: Sizing, parts: Parts) -> Moment:
    loaded, how = _loaded(s, parts)
    v, mem = parts.vllm, s.hardware.memory_gib
    if v is None or v.mode != "colocate":
        return Moment("load", "load", loaded, mem, f"{how}: {loaded:.1f} GiB")
    return Moment("load", "load + vLLM start-up check", loaded + v.share_gib, mem,
                  f"{how} {loaded:.1f} GiB + vLLM's requested share {s.util} × {mem:.1f} = {v.share_gib:.1f} GiB "
                  "that must still be free (vllm request_memory)")


def _engine(s: Sizing, parts: Parts) -> Moment | None:
    v = parts.vllm
    if v is None:
        return None
    seqs = min(SERVER_MIN_SEQS, v.max_num_seqs) if v.mode == "server" else 1
    kv = seqs * gib(kv_cache_bytes(s.model, s.seq_len) / v.tensor_parallel_size)
    need = v.weights_gib + v.activation_gib + v.overhead_gib + kv
    where = f"each of {v.gpus} server GPU(s)" if v.mode == "server" else "the colocated engine"
    return Moment("engine", "vLLM engine start", need, v.share_gib,
                  f"{where}: weights {v.weights_gib:.1f} + profile-run activations {v.activation_gib:.1f} + overhead "
                  f"{v.overhead_gib:.1f} + KV for {seqs} sequence(s) of {v.seq_len} tokens {kv:.1f} GiB, inside the "
                  f"share {v.utilization} × {s.hardware.memory_gib:.1f} GiB", headroom=False)


def _sync(s: Sizing, parts: Parts) -> Moment | None:
    """A weight sync: everything resident, the engine with its weights awake, and what TRL gathers to push."""
    v = parts.vllm
    if v is None:
        return None
    m, k = s.model, s.k
    peft = k.method in ("lora", "qlora")
    resident = sum(c.gib for c in parts.components if c.phase in ("resident", "context"))
    engine = 0.0 if v.mode == "server" else (v.weights_gib + v.overhead_gib if v.sleep_mode else v.share_gib)
    merge = gib(m.largest_linear * 6) if peft else 0.0  # one adapter's fp32 delta and its cast, merged in place
    if peft and s.zero3:
        gathered = gib(policy_bytes(s))
        how = (f"TRL 1.16 gathers every parameter at once for a PEFT model under ZeRO-3 ({gathered:.1f} GiB, the "
               "whole policy on every rank) before merging the adapters")
    elif s.zero3:
        gathered = gib(m.largest_layer_params * 2)
        how = f"ZeRO-3 gathers one parameter at a time (largest {gathered:.2f} GiB)"
    else:
        gathered = 0.0
        how = "the weights are whole on every rank: nothing gathered" + (", adapters merged in place" if peft else "")
    twice = "; server mode walks the parameters twice on the first sync (metadata, then the stream)" if (
        v.mode == "server" and gathered) else ""
    total = resident + engine + gathered + merge
    return Moment("sync", "weight sync", total, s.hardware.memory_gib,
                  f"resident {resident:.1f}" + (f" + engine {engine:.1f}" if engine else "")
                  + f" + gathered {gathered + merge:.1f} GiB: {how}{twice}")


def moments(s: Sizing, parts: Parts, step_gib: float) -> tuple[Moment, ...]:
    """Every moment of this configuration, in the order a run meets them."""
    mem = s.hardware.memory_gib
    step = Moment("step", "steady-state step", step_gib, mem,
                  "the larger of generation and the backward pass (component table above)")
    found = [_load(s, parts), _engine(s, parts), _sync(s, parts), step]
    return tuple(m for m in found if m is not None)


def problems(s: Sizing, parts: Parts, found: tuple[Moment, ...]) -> list[str]:
    """One line per moment past its limit, with the direction that helps (never one that the other moment
    forbids: a colocated share must both hold the engine and be free at start-up)."""
    by = {m.key: m for m in found}
    v, mem, out = parts.vllm, s.hardware.memory_gib, []
    if v is not None and v.mode == "colocate":
        loaded, _ = _loaded(s, parts)
        need = by["engine"].gib
        low, high = math.ceil(100 * need / mem) / 100, math.floor(100 * (mem - loaded) / mem) / 100
        other = "server mode (more GPUs), " + ("" if s.k.method == "qlora" else "QLoRA, ")
        hint = (f"no share fits on this GPU: the engine needs ≥ {low:.2f} of it and only {max(high, 0):.2f} is free "
                f"after loading the policy — use {other}a TP group of colocated engines or GPUs with more memory"
                if low > high else f"set vllm_gpu_memory_utilization between {low:.2f} and {high:.2f}")
        if by["load"].gib > by["load"].limit_gib:
            out.append(f"vLLM start-up check fails: {v.utilization} × {mem:.1f} GiB = {v.share_gib:.1f} GiB is not "
                       f"free after loading the policy ({loaded:.1f} GiB); {hint}")
        if need > v.share_gib:
            out.append(f"vLLM share {v.utilization} ({v.share_gib:.1f} GiB) cannot hold its weights "
                       f"({v.weights_gib:.1f} GiB) + overhead and one {s.seq_len}-token sequence; {hint}")
    elif v is not None and by["engine"].gib > by["engine"].limit_gib:
        out.append(f"a `trl vllm-serve` GPU cannot hold the engine at TP {v.tensor_parallel_size} "
                   f"({by['engine'].gib:.1f} of {v.share_gib:.1f} GiB): a larger TP or GPUs with more memory")
    if "sync" in by and by["sync"].gib > mem:
        out.append(f"the weight sync needs {by['sync'].gib:.1f} GiB of {mem:.1f}: {by['sync'].detail}")
    return out
