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
class LinearGroup:
    """All nn.Linear modules sharing a leaf name and shape: ``count`` × (d_in → d_out)."""

    name: str
    d_in: int
    d_out: int
    count: int
    is_output_head: bool = False
    paths: tuple[str, ...] = ()  # the modules' full names (model.named_modules()), what PEFT matches against


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
    def quantizable_params(self) -> int:
        """Weights bitsandbytes 4-bit quantizes: every nn.Linear except the output head.

        Embeddings, norms, routers' siblings held as plain Parameters (fused MoE experts) stay bf16.
        """
        return sum(g.d_in * g.d_out * g.count for g in self.linear_groups if not g.is_output_head)

    def lora_targets(self, target_modules: str | list[str] | tuple[str, ...] = "all-linear") -> list[LinearGroup]:
        """The linear groups PEFT adapts for ``target_modules``, each cut to the modules it matches.

        PEFT's LoraConfig semantics (peft.tuners.tuners_utils.check_target_module_exists): ``all-linear`` (any
        case) = every Linear but the output head; any other string is a regular expression the module's full
        name must match entirely (``re.fullmatch``); a list names modules by their full name or a dotted
        suffix of it (``q_proj``, ``self_attn.q_proj``). A name (or pattern) matching no linear layer, or
        one adapting the LM head, is a UserError (:func:`lora_target_problem`).
        """
        problem = lora_target_problem(self, target_modules)
        if problem:
            raise UserError(problem[0], where="lora.target_modules", fix=problem[1])
        out = []
        for g in self.linear_groups:
            hit = tuple(p for p in g.paths if _lora_matches(target_modules, p, g.is_output_head))
            if hit:
                out.append(replace(g, count=len(hit), paths=hit))
        return out

    def linear_leaf_names(self) -> list[str]:
        """The distinct last components of this model's linear layers but the head (q_proj, ...), in order."""
        return list(dict.fromkeys(g.name for g in self.linear_groups if not g.is_output_head))

    def lora_params(self, r: int, target_modules: str | list[str] | tuple[str, ...] = "all-linear") -> int:
        """LoRA trainable parameters: r × (d_in + d_out) per adapted projection."""
        return sum(r * (g.d_in + g.d_out) * g.count for g in self.lora_targets(target_modules))

    def summary(self) -> str:
        moe = f", MoE {self.num_experts} experts / {self.experts_per_token} active " \
              f"({self.active_params / 1e9:.2f} B active)" if self.is_moe else ""
        return (f"{self.name}: {self.params / 1e9:.3f} B params ({self.scale_class}), {self.layers} layers, "
                f"hidden {self.hidden}, {self.heads} heads / {self.kv_heads} KV, vocab {self.vocab}"
                f"{', tied embeddings' if self.tied else ''}{moe}{', vision-language' if self.is_vlm else ''}")


ALL_LINEAR = "all-linear"  # peft.utils.INCLUDE_LINEAR_LAYERS_SHORTHAND (matched case-insensitively)


def is_all_linear(target_modules: str | list[str] | tuple[str, ...]) -> bool:
    """PEFT's shorthand: the string all-linear, any case (a list holding it names a module)."""
    return isinstance(target_modules, str) and target_modules.lower() == ALL_LINEAR


def _lora_matches(target_modules: str | list[str] | tuple[str, ...], path: str, is_head: bool) -> bool:
    """Whether PEFT adapts the module named ``path`` for ``target_modules`` (see ModelInfo.lora_targets)."""
    if is_all_linear(target_modules):
        return not is_head
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, path) is not None
    return any(path == key or path.endswith("." + key) for key in target_modules)


def lora_target_problem(info: ModelInfo, target_modules: str | list[str] | tuple[str, ...]) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) with ``target_modules`` for this model, or None: an invalid pattern, a name
    matching none of its linear layers, or the LM head (TRL 1.16's fused head bypasses an adapter on it)."""
    if is_all_linear(target_modules):
        return None
    names = ", ".join(info.linear_leaf_names())
    listed = f"name linear layers of {info.name} ({names}) in a list, or use all-linear"
    paths = [(p, g.is_output_head) for g in info.linear_groups for p in g.paths]
    if isinstance(target_modules, str):
        regex = ("a single string other than all-linear is a regular expression the full module name must match "
                 f"(e.g. {paths[0][0] if paths else 'model.layers.0.self_attn.q_proj'}); {listed}")
        try:
            hits = [(p, head) for p, head in paths if re.fullmatch(target_modules, p)]
        except re.error as exc:
            return f"target_modules pattern {target_modules!r} is not a regular expression ({exc})", regex
        if not hits:
            return f"target_modules pattern {target_modules!r} matches no linear layer of {info.name}", regex
    else:
        unknown = [k for k in target_modules if not any(_lora_matches([k], p, head) for p, head in paths)]
        if unknown:
            return f"target_modules {', '.join(map(repr, unknown))}: no linear layer of {info.name} has that name", \
                listed
        hits = [(p, head) for p, head in paths if _lora_matches(target_modules, p, head)]
    if any(head for _, head in hits):
        return ("target_modules adapts the output head: TRL 1.16's GRPOTrainer computes log-probs with a fused LM "
                "head that reads lm_head.weight directly, so a LoRA adapter there would never train",
                f"leave the head out ({names} or all-linear)")
    return None


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

    return hashlib.sha256(raw_bytes + f"|transformers={version('transformers')}|v3".encode()).hexdigest()[:32]


def _from_disk(path: Path) -> ModelInfo | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["linear_groups"] = tuple(LinearGroup(**{**g, "paths": tuple(g["paths"])}) for g in data["linear_groups"])
        return ModelInfo(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, corrupt or from an older layout: recompute


def _to_disk(path: Path, info: ModelInfo) -> None:
    from dataclasses import asdict

    from finetune import atomic

    try:
        atomic.write_json(path, asdict(info))
    except OSError:
        pass  # a read-only home is no reason to fail an estimate


def _read_config(path: str) -> dict[str, Any]:
    from finetune import jsonio

    data = jsonio.read_json(path, fix="fix the config.json")
    if not isinstance(data, dict) or "model_type" not in data:
        raise UserError("not a transformers config.json (no model_type)", where=path,
                        fix="pass the model's own config.json")
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
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"transformers {transformers.__version__} cannot read this config: {exc}", where=path,
                        fix="check model_type / architectures, or pass a config this transformers supports") from None
    model = _build_on_meta(config, path, torch)
    return _inventory(model, config, raw, Path(path).parent.name, path)


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
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
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
    )
