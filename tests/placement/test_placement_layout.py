"""finetune.placement.arrange and decide: the layout a request names, the rules it is held to (vLLM's TP checks,
TRL's colocate rule, QLoRA never serves, node 0 generates whole), the GPU ordinals each launch branch pins, and
decide's preference order, with a stand-in for the memory model."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from finetune.errors import UserError
from finetune.hardware import resolve_hardware
from finetune.models import load_model_info
from finetune.placement import Layout, LayoutRefusal, Request, arrange, decide
from finetune.vllm_layout import Shapes


@pytest.fixture(scope="module")
def qwen7():
    return load_model_info("Qwen/Qwen2.5-7B")


def hw(gpus: int = 1, nodes: int = 1, **kw):
    return resolve_hardware({"profile": "h100-80gb", "gpus": gpus, "nodes": nodes, **kw})


def test_one_gpu_colocates_and_pins_that_gpu(qwen7):
    lay = arrange(qwen7, hw(), "lora", Request())
    assert (lay.vllm_mode, lay.training_processes, lay.zero_stage, lay.training_gpu_ids) == ("colocate", 1, 0, (0,))
    assert lay.generation_gpu_ids == () and lay.server_gpus is None
    assert arrange(qwen7, hw(), "full", Request(zero_stage=3)).zero_stage == 0  # one process has nothing to shard


def test_one_node_server_pins_disjoint_gpus(qwen7):
    lay = arrange(qwen7, hw(8), "lora", Request(vllm_gpus=3))
    assert (lay.vllm_mode, lay.vllm_tp, lay.vllm_dp, lay.training_processes) == ("server", 1, 3, 5)
    assert lay.generation_gpu_ids == (0, 1, 2) and lay.training_gpu_ids == (3, 4, 5, 6, 7)
    assert "TP 1 × DP 3" in lay.reason and lay.layout_reason.startswith("TP 1 ")
    with pytest.raises(LayoutRefusal) as exc:  # TP 2 leaves one of 3 idle on a node that could train on it
        arrange(qwen7, hw(8), "lora", Request(vllm_gpus=3, vllm_tensor_parallel_size=2))
    assert "1 GPU(s) would idle" in str(exc.value) and ("hardware.vllm_gpus", 2) in exc.value.alternatives


def test_several_nodes_generate_from_node_zero_whole(qwen7):
    lay = arrange(qwen7, hw(8, 3), "full", Request(zero_stage=3))
    assert (lay.vllm_gpus, lay.training_nodes, lay.processes_per_node, lay.training_processes) == (8, 2, 8, 16)
    assert lay.generation_gpu_ids == tuple(range(8)) and lay.training_gpu_ids == tuple(range(8))
    assert (lay.last_node, lay.training_ranks, lay.shards, lay.zero3) == (2, (0, 1), 16, True)
    with pytest.raises(LayoutRefusal) as exc:
        arrange(qwen7, hw(8, 2), "lora", Request(vllm_gpus=4))
    assert exc.value.alternatives == [("hardware.vllm_gpus", 8)]
    idle = arrange(load_model_info("Qwen/Qwen2.5-72B"), hw(6, 2), "full", Request(vllm_tensor_parallel_size=4))
    assert (idle.vllm_dp, idle.idle_gpus, idle.generation_gpu_ids) == (1, 2, (0, 1, 2, 3))


def test_qlora_generates_without_vllm_and_shards_with_a_quant_storage(qwen7):
    """A server refuses the merged 4-bit weights (TRL issue #4973), and vLLM 0.30 has no bitsandbytes for TRL to start
    a colocated engine with: QLoRA generates with transformers."""
    with pytest.raises(LayoutRefusal) as exc:
        arrange(qwen7, hw(4), "qlora", Request(vllm_gpus=1))
    assert "#4973" in str(exc.value) and exc.value.alternatives == [("hardware.vllm_gpus", 0), ("method", "lora")]
    with pytest.raises(LayoutRefusal) as exc:
        arrange(qwen7, hw(4), "qlora", Request(use_vllm=True))
    assert "Unknown quantization method" in str(exc.value) and exc.value.alternatives == [("method", "lora")]
    lay = arrange(qwen7, hw(4), "qlora", Request(zero_stage=3))
    assert not lay.use_vllm and lay.vllm_mode is None and lay.quant_storage == "bfloat16"
    assert lay.training_gpu_ids == (0, 1, 2, 3) and lay.generation_gpu_ids == ()
    assert arrange(qwen7, hw(4), "qlora", Request(zero_stage=0)).quant_storage is None
    assert not arrange(qwen7, hw(8, 2), "qlora", Request()).use_vllm  # several nodes: every node trains


def test_colocated_tp_is_held_to_trl_and_to_vllms_mlp_split():
    """Qwen2.5-1.5B: TP 6 passes the head rules (12 / 2) but not the MLP (8960 % 6 ≠ 0), which vLLM asserts."""
    small = load_model_info("Qwen/Qwen2.5-1.5B")
    with pytest.raises(LayoutRefusal) as exc:
        arrange(small, hw(6), "lora", Request(vllm_mode="colocate", vllm_tensor_parallel_size=6))
    assert "intermediate_size 8960" in str(exc.value)
    assert [v for _, v in exc.value.alternatives] == [1, 2]  # TPs that divide 6 processes and pass vLLM
    with pytest.raises(LayoutRefusal) as exc:
        arrange(small, hw(4), "lora", Request(vllm_mode="colocate", vllm_tensor_parallel_size=3))
    assert "divide the 4 training process(es)" in str(exc.value)
    assert arrange(small, hw(4), "lora", Request(vllm_mode="colocate", vllm_tensor_parallel_size=4)).vllm_tp == 4


def test_bad_requests_are_user_errors(qwen7):
    with pytest.raises(UserError):
        arrange(qwen7, hw(), "dora", Request())
    with pytest.raises(UserError):
        arrange(qwen7, hw(2), "full", Request(zero_stage=1))
    with pytest.raises(LayoutRefusal):
        arrange(qwen7, hw(2), "lora", Request(vllm_gpus=2))
    cpu = arrange(qwen7, resolve_hardware("cpu"), "full", Request())
    assert cpu.cpu and cpu.training_processes == 1 and not cpu.use_vllm


@dataclass(frozen=True)
class _Fit:
    fits: bool
    pressure: float


def _sizer(accept):
    seen: list[Layout] = []

    def size(lay: Layout) -> _Fit:
        seen.append(lay)
        return _Fit(accept(lay), 2.0 - len(seen) / 100)

    return size, seen


def test_decide_prefers_the_fewest_server_gpus_then_colocates(qwen7):
    size, seen = _sizer(lambda lay: lay.server and lay.vllm_tp * lay.vllm_dp >= 2 and lay.zero_stage == 3)
    d = decide(qwen7, hw(4), "lora", Request(), size)
    assert d.fits and (d.layout.vllm_gpus, d.layout.vllm_tp, d.layout.zero_stage) == (2, 1, 3)
    assert [(s.vllm_gpus, s.vllm_tp, s.zero_stage) for s in seen] == [(1, 1, 0), (1, 1, 3), (2, 1, 0), (2, 1, 3)]
    size, seen = _sizer(lambda lay: False)  # nothing fits: the least bad, every option tried, colocated ones last
    d = decide(qwen7, hw(4), "full", Request(), size)
    assert not d.fits and d.layout is seen[-1] and seen[-1].vllm_mode == "colocate"
    assert {s.zero_stage for s in seen if s.training_processes > 1} == {2, 3}  # one process: none


def test_decide_lays_qlora_out_without_vllm_and_tries_colocated_tp_groups_for_lora(qwen7):
    size, seen = _sizer(lambda lay: lay.zero_stage == 3)
    d = decide(qwen7, hw(4), "qlora", Request(), size)
    assert not d.layout.use_vllm and [s.zero_stage for s in seen] == [0, 3]
    size, seen = _sizer(lambda lay: lay.vllm_mode == "colocate" and lay.vllm_tp == 2)
    assert decide(qwen7, hw(4), "lora", Request(), size).layout.vllm_tp == 2
    assert [s.vllm_tp for s in seen if s.vllm_mode == "colocate"] == [1, 1, 2]  # TP 1 at ZeRO 0 and 3, then TP 2


def test_decide_on_several_nodes_takes_the_smallest_tp_whose_engine_fits():
    shapes = Shapes(64, 8, 29568)
    size, seen = _sizer(lambda lay: lay.vllm_tp >= 4)
    d = decide(shapes, hw(8, 2), "full", Request(), size)
    assert (d.layout.vllm_tp, d.layout.vllm_dp, d.layout.idle_gpus) == (4, 2, 0)
    assert [s.vllm_tp for s in seen[::2]] == [1, 2, 4]  # ZeRO-2 and ZeRO-3 at each TP
