"""Model facts for memory estimates: exact parameter counts from a config, with no weights.

A config comes from a local model folder / config.json, or from a bundled config.json for the common
models of each scale class (``data/model_configs/<org>/<name>/config.json``, public values). The
model is built on the meta device, which needs no memory. Build it under ``torch.device("meta")``, not
``accelerate.init_empty_weights()``: the latter leaves tied embeddings untied and counts the
embedding twice (Qwen2.5-0.5B: 0.630 B instead of 0.494 B).
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError
from finetune.loratargets import Adapted, adapted
from finetune.modelparts import FusedParam, LinearGroup

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

BUNDLED_DIR = Path(__file__).parent / "data" / "model_configs"

# Scale classes of references/grpo-memory.md: (name, upper bound in parameters). "≤3B" covers every
# dense model below 5 B (Qwen3-4B included); an MoE model is its own class whatever its size.
SCALE_CLASSES: tuple[tuple[str, float], ...] = (
    ("≤3B", 5e9), ("7-8B", 11e9), ("14B", 24e9), ("32B", 50e9), ("70B", math.inf),
)
MOE_CLASS = "MoE"
SCALE_CLASS_NAMES = tuple(n for n, _ in SCALE_CLASSES) + (MOE_CLASS,)

# Hub-id suffixes whose config is architecturally the base model's (chat / instruct fine-tunes).
_VARIANT_SUFFIXES = ("-instruct", "-base", "-chat", "-it")


@dataclass(frozen=True)
class ModelInfo:
    """Exact architecture facts of one model (text decoder), from its config built on the meta device."""

    name: str
    source: str
    model_type: str
    architecture: str
    params: int
    embedding_params: int
    lm_head_params: int  # 0 when tied to the input embedding
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    is_moe: bool
    num_experts: int
    experts_per_token: int
    expert_params: int  # all routed-expert weights together (0 for a dense model)
    active_params: int  # parameters touched per token (= params for a dense model)
    is_vlm: bool
    largest_layer_params: int  # largest single module's own parameters (DeepSpeed ZeRO-3 gather buffer)
    linear_groups: tuple[LinearGroup, ...] = field(default=(), repr=False)
    moe_intermediate: int = 0
    max_position_embeddings: int = 0
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3): more activations kept per layer
    # PEFT's transformers-5 MoE remap for this model type (peft.utils.transformers_weight_conversion): old target
    # name → fused parameter, and the old names fused into one tensor; the parameters they name
    fused_params: tuple[FusedParam, ...] = field(default=(), repr=False)
    peft_moe_targets: tuple[tuple[str, str], ...] = ()
    peft_moe_fused: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # what transformers picks when train.py names none: "eager" for a model class without SDPA support (gemma-2:
    # `_supports_sdpa = False`, soft-capped attention), whose backward keeps B × heads × T² scores per layer
    attn_implementation: str = "sdpa"
    attn_softcapping: bool = False  # tanh soft-capping of the attention scores (one more T² tensor kept)
    sandwich_norm: bool = False  # RMSNorms after attention and after the MLP too (gemma-2): two more kept per layer

    @property
    def scale_class(self) -> str:
        return scale_class_of(self.params, self.is_moe)

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV cache per token: 2 (K and V) × layers × kv_heads × head_dim × bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    @property
    def largest_linear(self) -> int:
        """The largest nn.Linear weight but the head (d_in × d_out): what merging one LoRA adapter touches at once."""
        return max((g.d_in * g.d_out for g in self.linear_groups if not g.is_output_head), default=0)

    @property
    def quantizable_params(self) -> int:
        """Weights bitsandbytes 4-bit quantizes: every nn.Linear except the output head.

        Embeddings, norms, routers' siblings held as plain Parameters (fused MoE experts) stay bf16.
        """
        return sum(g.d_in * g.d_out * g.count for g in self.linear_groups if not g.is_output_head)

    def lora_targets(self, target_modules: str | list[str] | tuple[str, ...] = "all-linear") -> list[LinearGroup]:
        """The linear groups PEFT adapts for ``target_modules``, each cut to the modules it matches (PEFT's
        semantics: :mod:`finetune.loratargets`); a name the model lacks, or the LM head, is a UserError."""
        return list(self._adapted(target_modules).groups)

    def lora_params(self, r: int, target_modules: str | list[str] | tuple[str, ...] = "all-linear") -> int:
        """LoRA trainable parameters: r × (d_in + d_out) per adapted projection, rank × E × (d1 + d2) per fused
        expert tensor PEFT adapts (:mod:`finetune.loratargets`)."""
        return self._adapted(target_modules).trainable(r)

    def _adapted(self, target_modules: str | list[str] | tuple[str, ...]) -> Adapted:
        found = adapted(self, target_modules)
        if found.problem:
            raise UserError(found.problem[0], where="lora.target_modules", fix=found.problem[1])
        return found

    def summary(self) -> str:
        moe = f", MoE {self.num_experts} experts / {self.experts_per_token} active " \
              f"({self.active_params / 1e9:.2f} B active)" if self.is_moe else ""
        return (f"{self.name}: {self.params / 1e9:.3f} B params ({self.scale_class}), {self.layers} layers, "
                f"hidden {self.hidden}, {self.heads} heads / {self.kv_heads} KV, vocab {self.vocab}"
                f"{', tied embeddings' if self.tied else ''}{moe}{', vision-language' if self.is_vlm else ''}")


def scale_class_of(params: int, is_moe: bool = False) -> str:
    if is_moe:
        return MOE_CLASS
    for name, upper in SCALE_CLASSES:
        if params < upper:
            return name
    return SCALE_CLASSES[-1][0]


def bundled_models() -> list[str]:
    """Hub ids with a bundled config.json."""
    return sorted(str(p.parent.relative_to(BUNDLED_DIR)) for p in BUNDLED_DIR.glob("*/*/config.json"))


def _bundled_config(name: str) -> Path | None:
    key = name.strip().strip("/").lower()
    table = {m.lower(): m for m in bundled_models()}
    by_short = {m.split("/", 1)[1].lower(): m for m in table.values()}
    for candidate in [key] + [key[: -len(s)] for s in _VARIANT_SUFFIXES if key.endswith(s)]:
        hit = table.get(candidate) or by_short.get(candidate)
        if hit:
            return BUNDLED_DIR / hit / "config.json"
    return None


def _local_config(value: str, base_dir: Path | None) -> Path | None:
    p = Path(value).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if p.is_dir() and (p / "config.json").is_file():
        return p / "config.json"
    if p.is_file():
        return p
    return None


def _looks_like_path(value: str) -> bool:
    return value.startswith((".", "/", "~")) or value.endswith(".json") or value.count("/") > 1


def _adapter_base(value: str, base_dir: Path | None) -> str | None:
    """The base model a PEFT adapter folder names (adapter_config.json), if ``value`` is one."""
    p = Path(value).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    adapter = p / "adapter_config.json"
    if not adapter.is_file():
        return None
    try:
        return json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path") or None
    except (OSError, ValueError):
        return None


def resolve_config_path(model: str, model_config: str | None = None, base_dir: str | Path | None = None) -> Path:
    """Find the config.json describing ``model`` (see :func:`load_model_info`).

    Order: ``model_config``; a local folder / config.json; a PEFT adapter folder's base model; the
    Hugging Face cache (offline); the bundled configs; config.json alone from the hub
    (:func:`finetune.hub.resolve_config`; one line naming the id and HF_HUB_OFFLINE when it cannot).
    """
    base = Path(base_dir) if base_dir is not None else None
    if model_config:
        found = _local_config(model_config, base) or (None if _looks_like_path(model_config)
                                                      else _bundled_config(model_config))
        if found is None:
            raise UserError(f"model_config '{model_config}' is neither a config.json / model folder nor a "
                            "bundled model", where="model_config",
                            fix="give the path of the model's config.json, or one of: " + ", ".join(bundled_models()))
        return found
    found = _local_config(model, base)
    if found is not None:
        return found
    adapter_base = _adapter_base(model, base)
    if adapter_base and adapter_base != model:
        return resolve_config_path(adapter_base, None, base)
    from finetune import hub

    found = hub.resolve_config(model, base, download=False)  # the HF cache, no network
    if found is not None:
        return found
    if _looks_like_path(model):
        raise UserError(f"no config.json at '{model}'", where="model",
                        fix="point `model` at a saved model folder, or add `model_config: path/to/config.json`")
    # bundled public configs before the network: estimates (and the generated docs) stay offline-stable
    found = _bundled_config(model)
    if found is not None:
        return found
    if not hub.is_repo_id(model):
        raise UserError(f"no config for model '{model}' (not a folder, a hub id org/name, or bundled)", where="model",
                        fix="add `model_config: path/to/config.json` to the spec (or --model-config), "
                            "or use one of: " + ", ".join(bundled_models()))
    try:
        found = hub.resolve_config(model, base)  # config.json alone, from the hub
    except UserError as exc:
        raise UserError(exc.what, where="model", fix=f"{exc.fix}; or add `model_config: path/to/config.json` to "
                        "the spec (--model-config)") from None
    assert found is not None  # a hub id: resolve_config returns a path or raises
    return found


def load_model_info(model: str, model_config: str | None = None, base_dir: str | Path | None = None) -> ModelInfo:
    """Facts about ``model`` from a local folder / config.json, ``model_config``, a PEFT adapter's base,
    the Hugging Face cache, or a bundled config (:func:`resolve_config_path`).

    ``model`` is a hub id or a path (relative paths resolve against ``base_dir``, the spec's folder).
    ``model_config`` (a config.json path, a model folder or a bundled hub id) takes precedence. A model
    with no config to be found is a UserError naming the ``model_config:`` field to set. Results are
    cached in-process (per file and modification time) and on disk (per config content and
    transformers version, see :func:`cache_dir`), so a repeated estimate skips importing torch.
    """
    path = resolve_config_path(model, model_config, base_dir).resolve()
    display = model if not _looks_like_path(model) else Path(model).name or model
    return replace(_load_cached(str(path), path.stat().st_mtime_ns), name=display)


def config_origin(info: ModelInfo) -> str:
    """Which config.json an estimate used for ``info``, in words: a bundled config stands in for a variant
    (an -Instruct release) only because the architecture is the same — say so, never silently."""
    path = Path(info.source)
    try:
        bundled = str(path.resolve().relative_to(BUNDLED_DIR.resolve()).parent)
    except ValueError:
        return f"model config: {path}" + (" (the Hugging Face cache)" if "models--" in str(path) else "")
    if bundled.lower() == info.name.lower():
        return f"model config: the bundled config.json of {bundled}"
    return (f"model config: the bundled config.json of {bundled}, used for {info.name} (a variant with the same "
            "architecture: sizes are the same); give `model_config:` / --model-config for its own config.json")


def cache_dir() -> Path | None:
    """Where computed ModelInfo is kept: $FINETUNE_CACHE_DIR (``off`` disables), else
    $XDG_CACHE_HOME/llm-finetuning/model-info (~/.cache/...)."""
    import os

    configured = os.environ.get("FINETUNE_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "none") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm-finetuning" / "model-info"


def _disk_key(raw_bytes: bytes) -> str:
    import hashlib
    from importlib.metadata import version

    stamp = f"|transformers={version('transformers')}|peft={_peft_version()}|v5"
    return hashlib.sha256(raw_bytes + stamp.encode()).hexdigest()[:32]


def _peft_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("peft")
    except PackageNotFoundError:
        return "none"


def _from_disk(path: Path) -> ModelInfo | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["linear_groups"] = tuple(LinearGroup(**{**g, "paths": tuple(g["paths"])}) for g in data["linear_groups"])
        data["fused_params"] = tuple(FusedParam(p["path"], tuple(p["shape"])) for p in data["fused_params"])
        data["peft_moe_targets"] = tuple((old, new) for old, new in data["peft_moe_targets"])
        data["peft_moe_fused"] = tuple((new, tuple(olds)) for new, olds in data["peft_moe_fused"])
        return ModelInfo(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, corrupt or from an older layout: recompute


def _to_disk(path: Path, info: ModelInfo) -> None:
    from dataclasses import asdict

    from finetune import jsonio

    try:
        jsonio.write_json(path, asdict(info))
    except OSError:
        pass  # a read-only home is no reason to fail an estimate


# Size fields of a config.json: whole numbers in [low, high] (or absent / null). A 0 head count divides by
# zero, a negative or 10**30 size breaks the meta build, a string reaches int(): each is a one-line error.
_SIZE_FIELDS = {"hidden_size": (1, 1 << 20), "num_attention_heads": (1, 1 << 14), "num_hidden_layers": (1, 1 << 14),
                "num_key_value_heads": (1, 1 << 14), "intermediate_size": (0, 1 << 22), "vocab_size": (1, 1 << 24),
                "head_dim": (1, 1 << 16), "max_position_embeddings": (0, 1 << 30), "num_experts": (0, 1 << 16),
                "num_local_experts": (0, 1 << 16), "num_experts_per_tok": (0, 1 << 16),
                "moe_intermediate_size": (0, 1 << 22)}


def _check_sizes(data: dict[str, Any], path: str, prefix: str = "") -> None:
    for key, (low, high) in _SIZE_FIELDS.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UserError(f"{prefix}{key} is {value!r:.40}: not a whole number in [{low}, {high}]", where=path,
                            fix="pass the model's own config.json (its published values)")
    for sub in ("text_config", "llm_config", "language_config"):
        if isinstance(data.get(sub), dict):
            _check_sizes(data[sub], path, f"{prefix}{sub}.")


def _read_config(path: str) -> dict[str, Any]:
    from finetune import jsonio

    data = jsonio.read_json(path, fix="fix the config.json")
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise UserError("not a transformers config.json (no model_type)", where=path,
                        fix="pass the model's own config.json")
    _check_sizes(data, path)
    return data


@functools.lru_cache(maxsize=64)
def _load_cached(path: str, mtime_ns: int) -> ModelInfo:
    del mtime_ns  # part of the cache key only: an edited config is re-read
    raw = _read_config(path)
    folder = cache_dir()
    disk = folder / f"{_disk_key(Path(path).read_bytes())}.json" if folder else None
    if disk is not None and disk.is_file():
        cached = _from_disk(disk)
        if cached is not None:
            return replace(cached, source=path)
    info = _compute(raw, path)
    if disk is not None:
        _to_disk(disk, info)
    return info


def _compute(raw: dict[str, Any], path: str) -> ModelInfo:
    import logging

    import torch
    import transformers
    from transformers import AutoConfig

    transformers.logging.set_verbosity_error()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        config = AutoConfig.for_model(**raw)
    except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
        raise UserError(f"transformers {transformers.__version__} cannot read this config: {exc}", where=path,
                        fix="check model_type / architectures, or pass a config this transformers supports") from None
    model = _build_on_meta(config, path, torch)
    try:
        return _inventory(model, config, raw, Path(path).parent.name, path)
    except (ArithmeticError, ValueError, TypeError, AttributeError) as exc:  # sizes that contradict each other
        raise UserError(f"cannot size the model this config describes ({type(exc).__name__}: {exc})"[:300],
                        where=path, fix="pass the model's own config.json (its published values)") from None


def _build_on_meta(config: PretrainedConfig, path: str, torch: ModuleType) -> PreTrainedModel:
    from transformers import AutoModel, AutoModelForCausalLM

    auto_classes = [AutoModelForCausalLM, AutoModel]
    try:
        from transformers import AutoModelForImageTextToText

        auto_classes.insert(1, AutoModelForImageTextToText)
    except ImportError:  # pragma: no cover - older transformers
        pass
    last: Exception | None = None
    for auto in auto_classes:
        try:
            with torch.device("meta"):
                model: PreTrainedModel = auto.from_config(config)
            # Tying is what makes a tied head count once; make sure it happened on the meta build too.
            if hasattr(model, "tie_weights"):
                model.tie_weights()
            return model
        except (ValueError, KeyError, TypeError, AttributeError, ArithmeticError, RuntimeError) as exc:
            last = exc
    raise UserError(f"cannot build model_type '{config.model_type}' from {path}: {last}", where=path,
                    fix="pass the config of a causal LM (or vision-language model) this transformers supports")


def _inventory(model: PreTrainedModel, config: PretrainedConfig, raw: dict[str, Any], display: str,
               path: str) -> ModelInfo:
    import torch

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once
    # nn.Module attributes type as Tensor | Module: these two are embedding layers with a .weight tensor
    emb: Any = model.get_input_embeddings()
    out: Any = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    embedding_params = emb.weight.numel() if emb is not None else 0
    tied = out is not None and emb is not None and out.weight is emb.weight
    lm_head_params = 0 if tied or out is None else out.weight.numel()

    groups: dict[tuple[str, int, int, bool], list[str]] = {}
    largest = 0
    expert_params = 0
    for name, module in model.named_modules():
        own = sum(p.numel() for p in module.parameters(recurse=False))
        largest = max(largest, own)
        if isinstance(module, torch.nn.Linear):
            key = (name.rsplit(".", 1)[-1], module.in_features, module.out_features, module is out)
            groups.setdefault(key, []).append(name)
        if type(module).__name__.endswith("Experts") or re.search(r"\.experts(\.\d+)?$", name):
            expert_params += sum(p.numel() for p in module.parameters(recurse=False))
    linear_groups = tuple(LinearGroup(n, i, o, len(names), head, tuple(names))
                          for (n, i, o, head), names in sorted(groups.items()))

    num_experts = int(getattr(text, "num_experts", None) or getattr(text, "num_local_experts", None)
                      or getattr(text, "n_routed_experts", None) or 0)
    experts_per_token = int(getattr(text, "num_experts_per_tok", None) or 0)
    is_moe = num_experts > 1
    active = params - expert_params + (expert_params * experts_per_token // num_experts if is_moe else 0)
    heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    archs = raw.get("architectures") or [type(model).__name__]
    is_vlm = bool(raw.get("vision_config")) or any(re.search(r"VL|Vision|ConditionalGeneration", a) for a in archs)
    return ModelInfo(
        name=display, source=path, model_type=str(config.model_type), architecture=str(archs[0]),
        params=int(params), embedding_params=int(embedding_params), lm_head_params=int(lm_head_params),
        layers=int(text.num_hidden_layers), hidden=hidden, heads=heads,
        kv_heads=int(getattr(text, "num_key_value_heads", None) or heads), head_dim=head_dim,
        intermediate=int(getattr(text, "intermediate_size", 0) or 0), vocab=int(text.vocab_size), tied=bool(tied),
        is_moe=is_moe, num_experts=num_experts if is_moe else 0, experts_per_token=experts_per_token if is_moe else 0,
        expert_params=int(expert_params), active_params=int(active), is_vlm=is_vlm, largest_layer_params=int(largest),
        linear_groups=linear_groups, moe_intermediate=int(getattr(text, "moe_intermediate_size", 0) or 0),
        max_position_embeddings=int(getattr(text, "max_position_embeddings", 0) or 0),
        qk_norm=any(name.endswith("self_attn.q_norm") for name, _ in model.named_modules()),
        attn_implementation=str(getattr(model.config, "_attn_implementation", None) or "sdpa"),
        attn_softcapping=bool(getattr(text, "attn_logit_softcapping", None)),
        sandwich_norm=any(name.endswith("post_feedforward_layernorm") for name, _ in model.named_modules()),
        **_peft_moe(model, str(config.model_type)),
    )


def _peft_moe(model: PreTrainedModel, model_type: str) -> dict[str, Any]:
    """PEFT's transformers-5 MoE remap for ``model_type`` (its own tables) and the parameters it targets here:
    ModelInfo's fused_params / peft_moe_targets / peft_moe_fused (empty when PEFT converts nothing)."""
    try:
        from peft.utils import transformers_weight_conversion as peft_conversion
        from peft.utils.transformers_weight_conversion import _MOE_FUSED_TARGETS, _MOE_TARGET_MODULE_MAPPING
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError:  # pragma: no cover - PEFT is pinned; without it there is no conversion to size
        return {}
    # PEFT's own copy of transformers' table (it adds mixtral)
    base = getattr(peft_conversion, "_MODEL_TO_CONVERSION_PATTERN", {}).get(model_type)
    mapping = _MOE_TARGET_MODULE_MAPPING.get(base or "", {})
    fused = _MOE_FUSED_TARGETS.get(base or "", {})
    if get_checkpoint_conversion_mapping(model_type) is None or not mapping or not fused:
        return {}
    import torch

    wanted = set(mapping.values())
    params = tuple(FusedParam(f"{mod_name}.{name}", tuple(int(d) for d in p.shape))
                   for mod_name, module in model.named_modules() if not isinstance(module, torch.nn.Linear)
                   for name, p in module.named_parameters(recurse=False)
                   if any(f"{mod_name}.{name}".endswith("." + w) for w in wanted))
    return {"fused_params": params, "peft_moe_targets": tuple(sorted(mapping.items())),
            "peft_moe_fused": tuple(sorted((new, tuple(olds)) for new, olds in fused.items()))}
