""":func:`decide`: the layout a run gets — every layout the request allows, most preferred first, each sized by the
caller's memory model, the first whose every moment fits.

Preference, for one node with several GPUs and nothing pinned: `trl vllm-serve` on the fewest GPUs whose engine
holds the model (the smallest TP vLLM allows, then more GPUs as DP replicas or a larger TP), the rest training —
generation and training then never contend for one device — then vLLM colocated in every training process, one
engine per GPU, else engines spanning a TP group of training ranks (each GPU holds 1/TP of the engine's weights beside
the policy). Several nodes: node 0 serves with the smallest TP whose engine holds the model, replicas filling the
node. QLoRA generates with transformers (no vLLM 0.30 layout can take a 4-bit policy: placement.layout.QLORA_VLLM).
Inside a layout the ZeRO stage: full fine-tuning ZeRO-2 before ZeRO-3 (the weights stay whole, no gather per
forward); LoRA / QLoRA none (plain DDP) before ZeRO-3 — under ZeRO-3 TRL 1.16 gathers every parameter at once for a
PEFT weight sync, so ZeRO-3 buys a PEFT run steady-state room only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from finetune.placement.layout import Layout, LayoutRefusal, Request, arrange
from finetune.vllm_layout import tp_allowed, tp_choices

if TYPE_CHECKING:
    from finetune.hardware import Hardware
    from finetune.vllm_layout import ParallelShapes


class Sized(Protocol):
    """What :func:`decide` needs of the memory model's answer for one layout."""

    @property
    def fits(self) -> bool:
        """Every moment (load, engine start, first weight sync, step) within the card with its headroom."""
        ...

    @property
    def pressure(self) -> float:
        """The binding moment's share of the card (> 1: does not fit): ranks layouts when none fits."""
        ...


S = TypeVar("S", bound=Sized)


@dataclass(frozen=True)
class Decision(Generic[S]):
    """The chosen layout and the memory model's answer for it; ``tried``: every layout sized, in order."""

    layout: Layout
    sized: S
    tried: tuple[tuple[Layout, S], ...]

    @property
    def fits(self) -> bool:
        return self.sized.fits


def decide(model: ParallelShapes, hw: Hardware, method: str, request: Request, size: Callable[[Layout], S]
           ) -> Decision[S]:
    """The first layout ``request`` allows on ``hw`` for ``method`` whose ``size(layout)`` fits, else the least bad
    one tried (its answer says by how much it misses). A request no layout satisfies raises its
    :class:`LayoutRefusal` (with the spec edits that would satisfy it)."""
    request = _with_hardware(request, hw)
    tried: list[tuple[Layout, S]] = []
    for candidate in _candidates(model, hw, method, request):
        try:
            layout = arrange(model, hw, method, candidate)
        except LayoutRefusal:
            continue  # a combination vLLM or TRL refuses: never offered
        sized = size(layout)
        tried.append((layout, sized))
        if sized.fits:
            return Decision(layout, sized, tuple(tried))
    if not tried:
        arrange(model, hw, method, request)  # the request itself is refused: say why, with what would do
        raise LayoutRefusal(f"no layout of {hw.describe()} satisfies the request", "hardware", [])
    layout, sized = min(tried, key=lambda t: t[1].pressure)
    return Decision(layout, sized, tuple(tried))


def _with_hardware(request: Request, hw: Hardware) -> Request:
    """The spec's ``hardware.vllm_gpus`` (resolved into ``hw``) is part of the request."""
    if request.vllm_gpus is None and hw.vllm_gpus is not None:
        return request.pinned(vllm_gpus=hw.vllm_gpus, vllm_mode=None if hw.vllm_gpus else "colocate")
    return request


def _zero_stages(method: str, request: Request, processes: int) -> list[int]:
    if request.zero_stage is not None or processes <= 1:
        return [request.zero_stage or 0]
    return [2, 3] if method == "full" else [0, 3]


def _candidates(model: ParallelShapes, hw: Hardware, method: str, request: Request) -> Iterator[Request]:
    """Every request to try, most preferred first (each still checked by :func:`arrange`)."""
    if hw.profile.is_cpu:
        yield request
        return
    if request.use_vllm is False or (method == "qlora" and request.use_vllm is None):  # QLoRA: see layout.QLORA_VLLM
        if method == "qlora" and (request.vllm_gpus or request.vllm_mode == "server"):
            return  # pinned to a server: arrange() refuses the request (TRL #4973), naming what would do
        for zero in _zero_stages(method, request, hw.total_gpus):
            yield request.pinned(zero_stage=zero)
        return
    for mode, vllm_gpus, tp in _generation_options(model, hw, method, request):
        processes = hw.total_gpus - (vllm_gpus if hw.nodes == 1 else hw.gpus)
        for zero in _zero_stages(method, request, processes):
            yield Request(use_vllm=True, vllm_mode=mode, vllm_gpus=vllm_gpus, vllm_tensor_parallel_size=tp,
                          zero_stage=zero)


def _generation_options(model: ParallelShapes, hw: Hardware, method: str, request: Request
                        ) -> Iterator[tuple[str, int, int]]:
    """(vLLM mode, server GPUs, TP) in preference order."""
    tp_pinned = request.vllm_tensor_parallel_size
    if hw.nodes > 1:
        if request.vllm_gpus not in (None, hw.gpus) or request.vllm_mode == "colocate":
            return  # node 0 generates whole: arrange() refuses the request, naming the count that would do
        tps = [tp_pinned] if tp_pinned else tp_choices(model, hw.gpus)
        even = [t for t in tps if hw.gpus % t == 0 and tp_allowed(t, model, hw.gpus // t)]
        for tp in even + [t for t in tps if t not in even]:
            yield "server", hw.gpus, tp
        return
    # colocated engines: TP 1, else a TP group of training ranks (weights / TP on each GPU beside the policy)
    colocate = [("colocate", 0, tp) for tp in ([tp_pinned] if tp_pinned else
                                                [t for t in tp_choices(model, hw.gpus) if hw.gpus % t == 0])]
    if hw.gpus == 1 or request.vllm_mode == "colocate" or request.vllm_gpus == 0:
        yield from colocate
        return
    counts = [request.vllm_gpus] if request.vllm_gpus else list(range(1, hw.gpus))
    for k in counts:
        for tp in [tp_pinned] if tp_pinned else [t for t in tp_choices(model, k) if k % t == 0]:
            yield "server", k, tp
    if not request.vllm_gpus and request.vllm_mode != "server":
        yield from colocate


def generation_gpu_alternatives(model: ParallelShapes, layout: Layout) -> list[Layout]:
    """One-node layouts with another `trl vllm-serve` GPU count that splits into whole replicas of ``layout``'s TP
    (or vLLM colocated), nearest count first — the layouts a batch-rule fix may offer."""
    hw, current = layout.hardware, layout.vllm_gpus
    out = []
    for v in sorted(range(0, hw.gpus), key=lambda v: (abs(v - current), v)):
        if v == current:
            continue
        request = layout.request().pinned(vllm_gpus=v, vllm_mode="server" if v else "colocate")
        try:
            out.append(arrange(model, hw, layout.method, request if v else
                               Request(vllm_gpus=0, vllm_mode="colocate", zero_stage=layout.zero_stage)))
        except LayoutRefusal:
            continue
    return out
