"""Accelerator profiles and the resolved hardware a run trains on.

Memory figures are what the device reports to CUDA (``torch.cuda.mem_get_info`` / nvidia-smi total),
in GiB, not the marketing "GB" on the box; bandwidths are the vendor's peak HBM/DRAM figures in GB/s
(10^9 bytes per second). :func:`resolve_hardware` turns the spec's ``hardware:`` section into a
:class:`Hardware` with the per-GPU memory and the GPU count; where each GPU goes is :mod:`finetune.placement`'s.

A profile is one ``GpuProfile(...)`` line in ``_entries()``; :data:`PROFILES` is built from them with each entry
checked (a name that is not lower-case, a label or note that is not one line, zero memory on a GPU, a name
registered twice): every command that reads the table exits 2 with one line naming the entry's line
(``errors.RegistryError``). :func:`get_profile` and :func:`resolve_hardware` look names up there; the spec's
``hardware.profile``, ``--profile`` and its ``--help``, references/grpo-memory.md's tables and config/target.json's
``gpu_requirements()`` (env check) read it.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from finetune.errors import RegistryError, UserError

if TYPE_CHECKING:
    from finetune.spec import HardwareSpec


@dataclass(frozen=True)
class GpuProfile:
    """One accelerator model.

    ``memory_gib`` is the memory one device offers to CUDA (per GPU). ``unified`` marks a device that
    shares its memory with the CPU and the operating system (DGX Spark): everything else the machine
    runs competes for the same pool, and an out-of-memory there can freeze the whole machine.
    """

    name: str
    label: str
    memory_gib: float
    bandwidth_gbs: float
    bf16: bool
    compute_capability: tuple[int, int] | None  # torch.cuda.get_device_capability(); None: the cpu profile
    min_cuda: str | None  # the oldest CUDA toolkit whose builds carry kernels for it ("11.8"); None: cpu
    node_gpus: int = 1  # GPUs of a typical node of these cards: the per-scale table's multi-GPU row when > 1
    unified: bool = False
    is_cpu: bool = False
    note: str = ""


# nvidia-smi totals: H100 SXM 81559 MiB, A100-80GB 81920 MiB, A100-40GB 40960 MiB, RTX 4090 24564 MiB,
# L40S 46068 MiB, H200 143771 MiB; DGX Spark (GB10) exposes ~119.7 GiB of its 128 GB to the GPU.
# Compute capability and the first CUDA toolkit that compiles for it (NVIDIA's CUDA GPUs table and the toolkit
# release notes): sm_80 CUDA 11.0, sm_89 / sm_90 CUDA 11.8, sm_121 (GB10) CUDA 12.9.
def _entries() -> tuple[GpuProfile, ...]:
    return (
        GpuProfile("h100-80gb", "NVIDIA H100 80GB (SXM)", 79.6, 3350, True, (9, 0), "11.8", node_gpus=8),
        GpuProfile("a100-80gb", "NVIDIA A100 80GB (SXM)", 80.0, 2039, True, (8, 0), "11.0", node_gpus=8),
        GpuProfile("a100-40gb", "NVIDIA A100 40GB", 40.0, 1555, True, (8, 0), "11.0", node_gpus=8),
        GpuProfile("rtx-4090-24gb", "NVIDIA GeForce RTX 4090 24GB", 24.0, 1008, True, (8, 9), "11.8", node_gpus=2),
        GpuProfile("l40s-48gb", "NVIDIA L40S 48GB", 45.0, 864, True, (8, 9), "11.8", node_gpus=4),
        GpuProfile("h200-141gb", "NVIDIA H200 141GB", 140.4, 4800, True, (9, 0), "11.8", node_gpus=8),
        GpuProfile("dgx-spark", "NVIDIA DGX Spark (GB10, 128 GB unified)", 119.7, 273, True, (12, 1), "12.9",
                   unified=True, note="unified LPDDR5x shared with the CPU and OS; decode is bandwidth-bound at "
                                      "273 GB/s; a GPU out-of-memory can freeze the whole machine"),
        GpuProfile("cpu", "CPU only (host RAM)", 0.0, 0.0, False, None, None, is_cpu=True,
                   note="memory is the host RAM detected at run time; training in fp32, no vLLM"),
    )


_FIELDS = ("GpuProfile(name, label, memory_gib, bandwidth_gbs, bf16, compute_capability, min_cuda, node_gpus=1, "
           "unified=False, is_cpu=False, note='')")


def _problem(p: GpuProfile) -> str | None:
    """What is wrong with one entry (None: nothing). Names are looked up lower-cased, so an entry must be too."""
    if not isinstance(p.name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", p.name):
        return f"name {p.name!r} is not a lower-case profile name (letters, digits, '-', '.')"
    if not isinstance(p.label, str) or not p.label.strip() or "\n" in p.label or "|" in p.label:
        return f"label {p.label!r} is not one line of text (it is a cell of the profile table)"
    for field in ("memory_gib", "bandwidth_gbs"):
        value = getattr(p, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            return f"{field}={value!r} is not a finite number ≥ 0"
        if value == 0 and not p.is_cpu:
            return f"{field}=0 on a GPU (only the cpu profile reads its memory from the host)"
    flags = {f: getattr(p, f) for f in ("bf16", "unified", "is_cpu")}
    if (wrong := next((f for f, v in flags.items() if not isinstance(v, bool)), None)) is not None:
        return f"{wrong}={flags[wrong]!r} is not True or False"
    if (problem := _cuda_problem(p)) is not None:
        return problem
    if isinstance(p.node_gpus, bool) or not isinstance(p.node_gpus, int) or not 1 <= p.node_gpus <= 64:
        return f"node_gpus={p.node_gpus!r} is not a GPU count in 1..64"
    return None if isinstance(p.note, str) and "\n" not in p.note else f"note {p.note!r} is not one line of text"


def _cuda_problem(p: GpuProfile) -> str | None:
    """A GPU states its compute capability (major, minor) and the oldest CUDA that builds for it; cpu states none."""
    cc, cuda = p.compute_capability, p.min_cuda
    if p.is_cpu:
        return None if cc is None and cuda is None else "the cpu profile has no compute_capability / min_cuda (None)"
    if not (isinstance(cc, tuple) and len(cc) == 2 and all(type(v) is int and 0 <= v < 100 for v in cc)):
        return f"compute_capability={cc!r} is not a (major, minor) pair of whole numbers, e.g. (9, 0)"
    if not (isinstance(cuda, str) and re.fullmatch(r"\d{1,2}\.\d{1,2}", cuda)):
        return f"min_cuda={cuda!r} is not a CUDA version such as '12.8'"
    return None


def _table(entries: Callable[[], tuple[GpuProfile, ...]]) -> dict[str, GpuProfile]:
    """:data:`PROFILES` from its entries, each checked: an incomplete or invalid one is refused in one line
    naming its line in this file (every command that reads the table refuses to run on it)."""
    source, first = inspect.getsourcelines(entries)
    where = f"{__file__}:{first}"
    try:
        profiles = entries()
    except TypeError as exc:  # a missing or unknown field: the dataclass names it, the traceback names the line
        line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.name == entries.__name__),
                    None)
        raise RegistryError(f"a GPU profile entry: {exc}", where=f"{__file__}:{line}" if line else where,
                            fix=f"give every field of {_FIELDS}") from None
    table: dict[str, GpuProfile] = {}
    for p in profiles:
        problem = "registered twice" if p.name in table else _problem(p)
        if problem:
            line = next((first + i for i, text in enumerate(source) if f'"{p.name}"' in text), None)
            raise RegistryError(f"GPU profile {p.name!r}: {problem}", where=f"{__file__}:{line}" if line else where,
                                fix=f"write it as {_FIELDS}")
        table[p.name] = p
    return table


PROFILES: dict[str, GpuProfile] = _table(_entries)


def host_ram_gib() -> float:
    """Physical RAM of this machine in GiB (the CPU profile's memory)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a modest workstation
        return 16.0


@dataclass(frozen=True)
class Hardware:
    """The machine(s) a run uses: ``gpus`` per node × ``nodes``, each with ``memory_gib``.

    ``vllm_gpus`` is what the spec pins of the layout: GPUs for `trl vllm-serve` (0 = colocate; ``None`` = left to
    :func:`finetune.placement.decide`, which decides where every GPU goes).
    """

    profile: GpuProfile
    gpus: int = 1
    nodes: int = 1
    memory_gib: float = 0.0
    vllm_gpus: int | None = None
    host_cpus: int | None = None  # logical CPUs per node (None: read on the host when training starts)

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.nodes

    @property
    def bandwidth_gbs(self) -> float:
        return self.profile.bandwidth_gbs

    def with_gpus(self, gpus: int) -> Hardware:
        return replace(self, gpus=gpus)

    def with_nodes(self, nodes: int) -> Hardware:
        return replace(self, nodes=nodes)

    def describe(self) -> str:
        count = f"{self.gpus}×" if self.gpus != 1 else ""
        nodes = f" × {self.nodes} nodes" if self.nodes > 1 else ""
        unit = "RAM" if self.profile.is_cpu else "per GPU"
        return f"{count}{self.profile.name}{nodes} ({self.memory_gib:.1f} GiB {unit})"


def gpu_requirements(profile: GpuProfile) -> dict[str, Any] | None:
    """What a training box must offer for ``profile``, as env check compares it (None for the cpu profile):
    ``compute_capability`` (``torch.cuda.get_device_capability()`` of each GPU), ``arch`` (the ``sm_XY`` that
    ``torch.cuda.get_arch_list()`` of the installed torch must carry, or a lower ``compute_XY`` PTX it can JIT) and
    ``min_cuda`` (``torch.version.cuda`` at least this). JSON-ready: config/target.json carries it.

    >>> gpu_requirements(PROFILES["h100-80gb"])
    {'profile': 'h100-80gb', 'compute_capability': [9, 0], 'arch': 'sm_90', 'min_cuda': '11.8'}
    """
    if profile.is_cpu or profile.compute_capability is None:
        return None
    major, minor = profile.compute_capability
    return {"profile": profile.name, "compute_capability": [major, minor], "arch": f"sm_{major}{minor}",
            "min_cuda": profile.min_cuda}


def get_profile(name: str, where: str = "hardware.profile") -> GpuProfile:
    """The profile called ``name``; an unknown name is a UserError listing the known ones."""
    key = str(name).strip().lower()
    if key not in PROFILES:
        raise UserError(f"unknown hardware profile '{name}'", where=where,
                        fix="use one of: " + ", ".join(PROFILES) + " (or set gpu_memory_gib to override memory)")
    return PROFILES[key]


def resolve_hardware(section: HardwareSpec | Mapping[str, Any] | str | None = None) -> Hardware:
    """Resolve the spec's ``hardware:`` section (a HardwareSpec, a mapping, a profile name or None).

    ``gpu_memory_gib`` overrides the profile's per-GPU memory (e.g. a card shared with other jobs).
    """
    spec: Mapping[str, Any] = ({} if section is None else {"profile": section} if isinstance(section, str)
                               else section if isinstance(section, Mapping) else section.model_dump())
    profile = get_profile(spec.get("profile") or "h100-80gb")
    gpus = int(spec.get("gpus", 1) if spec.get("gpus") is not None else 1)
    nodes = int(spec.get("nodes") or 1)
    if gpus < 0 or nodes < 1:
        raise UserError(f"gpus={gpus}, nodes={nodes}", where="hardware", fix="gpus ≥ 0 and nodes ≥ 1")
    if gpus == 0 and not profile.is_cpu:
        raise UserError("gpus: 0 with a GPU profile", where="hardware.gpus", fix="use profile: cpu, or gpus ≥ 1")
    memory = spec.get("gpu_memory_gib")
    if memory is None:
        memory = host_ram_gib() if profile.is_cpu else profile.memory_gib
    vllm_gpus = spec.get("vllm_gpus")
    if vllm_gpus is not None:
        vllm_gpus = int(vllm_gpus)
        if profile.is_cpu and vllm_gpus:
            raise UserError("vllm_gpus with the cpu profile", where="hardware.vllm_gpus",
                            fix="vLLM needs a GPU; remove vllm_gpus")
        if vllm_gpus >= gpus * nodes and vllm_gpus:
            raise UserError(f"vllm_gpus={vllm_gpus} leaves no GPU to train on ({gpus * nodes} in all)",
                            where="hardware.vllm_gpus", fix="give vLLM fewer GPUs than the run has")
    # a CPU run is one process whatever `gpus` says (0 is the natural spelling there)
    host_cpus = int(spec["host_cpus"]) if spec.get("host_cpus") is not None else None
    return Hardware(profile=profile, gpus=max(gpus, 1), nodes=nodes, memory_gib=float(memory), vllm_gpus=vllm_gpus,
                    host_cpus=host_cpus)
