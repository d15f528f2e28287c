#!/usr/bin/env python3
"""Can THIS machine and THIS interpreter run the rendered config? (`finetune env check [RUN]`)

Reads ``config/target.json`` (what `finetune config render` says the config needs) and checks, on
the machine it runs on: Python, torch with CUDA and the GPU count / memory the config was sized for, each GPU's
compute capability and the torch build's CUDA / kernels against the profile (``hardware.gpu``),
the exact TRL the config was rendered for, vLLM within TRL's supported range when vLLM generates,
DeepSpeed when a ZeRO config was rendered, the packages the rewards import, the `trl` / `accelerate`
commands beside this interpreter, `curl` for launch.sh's health check, and the training data and the model
the config names (relative paths from the run directory; a hub id in the cache or reachable), the installed
versions against combinations known to break (``KNOWN_BAD``, each with its upstream issue), which GPUs the
layout uses of those visible, and for a reward sandbox the isolation this host grants and its workers × training
processes against the host's CPUs. Each missing piece is printed with the exact command that installs it into
this interpreter. Exit 0 ready, 1 not ready, 2 no readable target.json.

Standalone on purpose: `finetune config render` writes this file beside target.json as
``config/env_check.py`` and launch.sh runs it with the interpreter it will train with, on a
training box that need not have the plugin. Standard library only (rich when installed).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO

TARGET = "config/target.json"
GPU_MEMORY_TOLERANCE = 0.95  # a GPU reporting 95% of the profile's memory is that GPU (driver reserve)
ISOLATION_LEVELS = ("process", "unprivileged", "namespaces")  # the sandbox runner's order (rewards_sandbox.py)
SANDBOX_MAX_WORKERS = 128  # the most workers one sandbox pool takes (rewards_sandbox.py's uid block per pool)

# Installed combinations known to break, each with its upstream report. ``when``: distribution → specifier (""
# = installed at all); every one must hold for the row to fire. TRL itself is pinned exactly (train.py refuses
# another), so these are the other packages beside TRL 1.16.
KNOWN_BAD = (  # type: tuple[dict[str, Any], ...]
    {"when": {"transformers": "==5.1.0", "deepspeed": ""},
     "breaks": "DeepSpeed ZeRO training breaks on transformers 5.1.0 (TRL excludes it from its deepspeed extra)",
     "issue": "huggingface/trl#4985 (fixed upstream by huggingface/transformers#43780)"},
    {"when": {"trl": "==1.16.0", "vllm": ">0.31.0"},
     "breaks": "newer than TRL 1.16 supports (trl/import_utils.py is_vllm_available: 0.22.0-0.31.0); vLLM is "
               "removing the weight-sync API TRL's clients call",
     "issue": "huggingface/trl#6732"},
    {"when": {"trl": "==1.16.0", "vllm": "<0.22.0"},
     "breaks": "older than TRL 1.16 supports: its weight sync needs vLLM's NCCL weight-transfer engine "
               "(trl/generation/vllm_client.py init_communicator)",
     "issue": "huggingface/trl#6119"},
)


@dataclass
class Check:
    """One row of the table: what the config needs, what this machine has, and the fix."""

    what: str
    need: str
    found: str
    ok: bool
    fix: str = ""


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string ('2.13.0+cu128' → (2, 13, 0)); pre-release tags dropped."""
    parts = []
    for piece in re.split(r"[.+-]", version):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.group() != piece:
            break
    return tuple(parts)


def satisfies(version: str, require: str) -> bool:
    """``version`` against a comma-separated specifier of ==, >=, <=, >, <, != (release numbers only)."""
    have = _release(version)
    for clause in filter(None, (c.strip() for c in require.split(","))):
        m = re.fullmatch(r"(==|>=|<=|!=|>|<)\s*(.+)", clause)
        if not m:
            return False
        op, want = m.group(1), _release(m.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        if not {"==": a == b, ">=": a >= b, "<=": a <= b, "!=": a != b, ">": a > b, "<": a < b}[op]:
            return False
    return True


def pip_line(requirement: str, *extra: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install", *extra, shlex.quote(requirement)])


_VERSIONS = {}  # type: dict[tuple[str, str], tuple[Optional[str], str]]


def _module_version(module: str, dist: str) -> tuple[Optional[str], str]:
    """(version or None, why not) — the module is imported, so a broken install counts as missing."""
    if (module, dist) not in _VERSIONS:
        _VERSIONS[(module, dist)] = _import_version(module, dist)
    return _VERSIONS[(module, dist)]


def _import_version(module: str, dist: str) -> tuple[Optional[str], str]:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure means this package is unusable here
        return None, f"not importable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    version = getattr(mod, "__version__", None)
    if not isinstance(version, str):
        from importlib import metadata

        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "unknown"
    return version, ""


def check_python(target: dict[str, Any]) -> Check:
    need = tuple(target.get("python", {}).get("min", (3, 10)))
    have = sys.version_info[:3]
    return Check("Python", ">= " + ".".join(map(str, need)), f"{'.'.join(map(str, have))} ({sys.executable})",
                 have >= need, "" if have >= need else f"use a Python >= {'.'.join(map(str, need))} environment "
                 "and point FINETUNE_PYTHON at its python")


def check_package(pkg: dict[str, Any]) -> Check:
    name, module, require = pkg["name"], pkg.get("module", pkg["name"]), pkg.get("require", "")
    version, why = _module_version(module, name)
    fix = pip_line(name + pkg.get("install_require", require))
    if version is None:
        return Check(name, require or "installed", why or "missing", False, fix)
    ok = not require or version == "unknown" or satisfies(version, require)
    return Check(name, require or "installed", version, ok, "" if ok else fix)


def check_known_bad(target: dict[str, Any]) -> list[Check]:
    """One row per installed combination of ``KNOWN_BAD``, naming the versions and the upstream issue."""
    modules = {p["name"]: p.get("module", p["name"]) for p in target.get("packages", [])}
    rows = []
    for combo in KNOWN_BAD:
        found = {}
        for dist, require in combo["when"].items():
            version = _module_version(modules.get(dist, dist.replace("-", "_")), dist)[0]
            if version is None or version == "unknown" or (require and not satisfies(version, require)):
                break
            found[dist] = version
        else:
            pair = " + ".join(f"{d} {v}" for d, v in found.items())
            off = [d for d, v in found.items() if modules_pin(target, d) and not satisfies(v, modules_pin(target, d))]
            rows.append(Check(f"versions {pair}", "a combination known to work", f"{combo['breaks']} — see "
                              f"{combo['issue']}", False, "install the versions this config was validated with: "
                              + "; ".join(pip_line(d + modules_pin(target, d)) for d in off)
                              if off else f"avoid this combination ({combo['issue']})"))
    return rows


def modules_pin(target: dict[str, Any], dist: str) -> str:
    """The version target.json installs for ``dist`` ('==5.24.0'), or ''."""
    for p in target.get("packages", []):
        if p["name"] == dist:
            return str(p.get("install_require", p.get("require", "")))
    return ""


def _gpus() -> tuple[Optional[str], int, float, str]:
    """(torch version or None, GPU count, smallest GPU memory in GiB, CUDA build) on this machine."""
    try:
        import torch
    except Exception:  # noqa: BLE001
        return None, 0, 0.0, ""
    cuda = getattr(torch.version, "cuda", None) or "none"
    if not torch.cuda.is_available():
        return torch.__version__, 0, 0.0, cuda
    count = torch.cuda.device_count()
    memory = min(torch.cuda.get_device_properties(i).total_memory for i in range(count)) / 2**30 if count else 0.0
    return torch.__version__, count, memory, cuda


def check_gpus(target: dict[str, Any]) -> list[Check]:
    hw = target["hardware"]
    if hw.get("cpu"):
        return []
    torch_version, count, memory, cuda = _gpus()
    if torch_version is None:
        return []  # the torch package row already says how to install it
    need, gib, profile = hw["gpus_per_node"], hw["gpu_memory_gib"], hw["profile"]
    rows = [Check("CUDA", "a CUDA build of torch", f"torch {torch_version}, CUDA {cuda}", cuda != "none",
                  "" if cuda != "none" else _torch_cuda_fix(torch_version))]
    rows.append(Check("GPUs", f"{need} per node ({profile})", str(count), count >= need,
                      "" if count >= need else f"run on a node with {need} GPUs visible (CUDA_VISIBLE_DEVICES)"
                      + (f", or re-render for this machine: hardware.gpus: {count}" if count else "")))
    if count:
        ok = memory >= GPU_MEMORY_TOLERANCE * gib
        rows.append(Check("GPU memory", f"{gib:.1f} GiB each", f"{memory:.1f} GiB (smallest)", ok,
                          "" if ok else f"re-render for this GPU: hardware.gpu_memory_gib: {memory:.1f} "
                          "(or its hardware.profile) so the batch sizes fit"))
    if count and cuda != "none" and hw.get("gpu"):
        rows += check_gpu_arch(hw["gpu"], *_gpu_arch(count), cuda, torch_version)
    if count >= need:
        rows.append(Check("GPUs used", f"{need} of the {count} visible", gpu_use(hw, count), True))
    return rows


def _torch_cuda_fix(torch_version: str) -> str:
    return (pip_line(f"torch=={_release_str(torch_version)}", "--force-reinstall", "--index-url",
                     "https://download.pytorch.org/whl/cu128") + "  (cu128: use the CUDA version `nvidia-smi` shows)")


def _gpu_arch(count: int) -> tuple[list[tuple[int, int]], list[str]]:
    """(each visible GPU's compute capability, the kernel targets the installed torch carries)."""
    import torch

    caps = [(int(c[0]), int(c[1])) for c in (torch.cuda.get_device_capability(i) for i in range(count))]
    return caps, [str(a) for a in torch.cuda.get_arch_list()]


def _runs_on(arch: str, cap: tuple[int, int]) -> bool:
    """Whether a torch kernel target runs on a GPU of ``cap``: a cubin (``sm_XY``) on the same major at an equal or
    higher minor, PTX (``compute_XY``) JIT-compiled on any equal or higher capability (CUDA's binary compatibility
    rules, CUDA C++ Programming Guide "Binary Compatibility" / "PTX Compatibility")."""
    match = re.fullmatch(r"(sm|compute)_(\d+)(\d)a?", arch)
    if not match:
        return False
    built = (int(match.group(2)), int(match.group(3)))
    return built[0] == cap[0] and built[1] <= cap[1] if match.group(1) == "sm" else built <= cap


def check_gpu_arch(gpu: dict[str, Any], caps: list[tuple[int, int]], archs: list[str], cuda: str,
                   torch_version: str) -> list[Check]:
    """The GPUs against the profile the config was rendered for (``gpu``: target.json's hardware.gpu, from
    ``finetune.hardware.gpu_requirements``): no GPU of a lower compute capability than the profile's (bf16 and the
    kernels the render assumed), a torch whose CUDA is at least the profile's oldest toolkit, and a torch build
    carrying kernels for each GPU found — else CUDA reports "no kernel image is available" at the first op."""
    want, arch, min_cuda = tuple(gpu["compute_capability"]), gpu["arch"], gpu["min_cuda"]
    found = ", ".join(sorted({f"{a}.{b}" for a, b in caps}))
    low = [c for c in caps if c < want]
    rows = [Check("GPU compute capability", f">= {want[0]}.{want[1]} ({gpu['profile']}, {arch})", found, not low,
                  "" if not low else f"re-render for this GPU: hardware.profile naming a {found} card (see "
                  "references/grpo-memory.md's profile table)")]
    cuda_ok = _release(cuda) >= _release(min_cuda)
    rows.append(Check("CUDA for the GPU", f"torch built with CUDA >= {min_cuda} ({arch})", f"CUDA {cuda}", cuda_ok,
                      "" if cuda_ok else _torch_cuda_fix(torch_version)))
    needed = sorted({f"sm_{a}{b}" for a, b in caps})
    missing = sorted({f"sm_{a}{b}" for a, b in caps if not any(_runs_on(t, (a, b)) for t in archs)})
    lacks = f" (this build lacks {', '.join(missing)})"
    rows.append(Check("torch kernels", f"a build carrying {', '.join(needed)}", ", ".join(archs) or "none",
                      not missing, "" if not missing else _torch_cuda_fix(torch_version) + lacks))
    return rows


def visible_gpus(count: int) -> list[str]:
    """The GPU ids a process here sees, as CUDA_VISIBLE_DEVICES names them (0..count-1 when it is unset)."""
    inherited = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return inherited[:count] if len(inherited) >= count else [str(i) for i in range(count)]


def gpu_use(hw: dict[str, Any], count: int) -> str:
    """Which of the visible GPUs the launch pins: the first the layout needs, in CUDA_VISIBLE_DEVICES order (a
    scheduler's setting is kept and narrowed, never replaced); the rest stay idle and unseen by training."""
    ids, need = visible_gpus(count), hw["gpus_per_node"]
    serve = int(hw.get("vllm_gpus") or 0) if hw.get("nodes", 1) == 1 else 0
    used = ids[:need]
    parts = ([f"vLLM server on {','.join(used[:serve])}", f"training on {','.join(used[serve:])}"] if serve
             else [f"CUDA_VISIBLE_DEVICES={','.join(used)}"])
    idle = f"; {count - need} idle ({','.join(ids[need:])})" if count > need else ""
    return "pins " + ", ".join(parts) + idle


def _release_str(version: str) -> str:
    return ".".join(map(str, _release(version)))


def check_scripts(target: dict[str, Any]) -> list[Check]:
    """The CLIs launch.sh runs from this interpreter's folder (not whatever is first on PATH)."""
    rows = []
    folder = Path(sys.executable).parent
    for s in target.get("scripts", []):
        path = folder / s["name"]
        ok = path.is_file() and os.access(path, os.X_OK)
        rows.append(Check(f"`{s['name']}` command", f"beside {sys.executable}", str(path) if ok else "missing", ok,
                          "" if ok else pip_line(s["package"], "--force-reinstall", "--no-deps")))
    return rows


def check_tools(target: dict[str, Any]) -> list[Check]:
    rows = []
    for tool in target.get("tools", []):
        found = shutil.which(tool["name"])
        rows.append(Check(tool["name"], tool.get("why", "on PATH"), found or "missing", bool(found),
                          "" if found else tool["install"]))
    return rows


def _local(run_dir: Path, value: str) -> Path:
    """A path of the rendered config: relative ones are relative to the run directory (as train.py reads them)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else run_dir / path


def _hub_model(repo: str) -> Check:
    """A hub id resolves: in this machine's Hugging Face cache, or reachable on the hub for the first start."""
    need = f"{repo} (hub id)"
    fetch = f"huggingface-cli download {shlex.quote(repo)}"
    try:
        from huggingface_hub import HfApi, try_to_load_from_cache
    except ImportError:
        return Check("model", need, "huggingface_hub missing", False, pip_line("huggingface_hub"))
    if isinstance(try_to_load_from_cache(repo, "config.json"), str):
        return Check("model", need, "in the Hugging Face cache", True)
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return Check("model", need, "not in the cache and HF_HUB_OFFLINE is set", False,
                     f"{fetch} (with network; then keep HF_HUB_OFFLINE), or unset HF_HUB_OFFLINE")
    try:
        HfApi().model_info(repo, timeout=15)
    except Exception as exc:  # offline, gated, misspelt: all mean the first start would fail
        return Check("model", need, f"not in the cache; the hub does not answer for it ({type(exc).__name__})",
                     False, f"{fetch} where the hub is reachable (set HF_TOKEN for a gated model), or copy "
                     "the model folder and set `model:` to its path")
    return Check("model", need, "not in the cache; on the hub (downloaded at the first start)", True)


def check_inputs(target: dict[str, Any], run_dir: Path) -> list[Check]:
    """The training data and the model the config names are where train.py will look for them."""
    inputs = target.get("inputs") or {}
    rows = []
    data = inputs.get("dataset")
    if data:
        path = _local(run_dir, data)
        ok = path.exists()
        rows.append(Check("training data", f"{data} (relative to the run directory)" if path != Path(data) else data,
                          str(path) if ok else "missing", ok, "" if ok else
                          f"copy the data to {path}: move the run folder together with the files its spec names "
                          "by relative path (or re-render with the path of this machine)"))
    model = inputs.get("model")
    if model and inputs.get("model_is_path"):
        path = _local(run_dir, model)
        ok = (path / "config.json").is_file()
        rows.append(Check("model", f"{model} (a model folder with config.json)", str(path) if ok else "missing",
                          ok, "" if ok else f"copy the model folder to {path}, or set `model:` to its hub id "
                          "and re-render"))
    elif model:
        rows.append(_hub_model(model))
    return rows


def host_cpus() -> int:
    """Logical CPUs this process may run on (a container's or scheduler's CPU set, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def sandbox_workers(cpus: int, processes: int, reserved: int = 0, fixed: int = 0, pools: int = 1) -> int:
    """Workers per sized sandbox pool in each training process: the node's CPUs less ``reserved`` (a vLLM server
    on the node) shared by its ``processes``, one CPU kept for each process itself and ``fixed`` for its pools of
    a set size (math-verify workers, a tool sandbox), the rest split over its ``pools``; at least 1, at most the
    runner's SANDBOX_MAX_WORKERS. The rendered train.py applies the same rule on the host it starts on."""
    share = (cpus - reserved) // max(processes, 1) - 1 - fixed
    return max(1, min(SANDBOX_MAX_WORKERS, share // max(pools, 1)))


def check_sandbox(target: dict[str, Any], run_dir: Optional[Path]) -> list[Check]:
    """The reward sandbox: the isolation its rewards need, and workers × training processes against this host's
    CPUs (an oversubscribed host times out correct programs under the per-execution wall-clock limit)."""
    box = target.get("sandbox")
    if not box:
        return []
    rows = []
    cpus, per = host_cpus(), int(box["processes_per_node"])
    sized = sandbox_workers(cpus, per, box["reserved_cpus"], box["fixed_workers"], box["sized_pools"])
    if box.get("workers_per_pool"):  # rendered for the target's host_cpus: never more than that here
        sized = min(sized, int(box["workers_per_pool"]))
    workers = box["fixed_workers"] + sized * box["sized_pools"]
    used = per * (workers + 1) + box["reserved_cpus"]
    rendered = f" (rendered for {box['host_cpus']})" if box.get("host_cpus") and box["host_cpus"] != cpus else ""
    rows.append(Check("sandbox CPUs", f"{per} training process(es) × ({workers} sandbox workers + 1)"
                      + (f" + {box['reserved_cpus']} for vLLM" if box["reserved_cpus"] else "") + f" = {used}",
                      f"{cpus} CPUs{rendered}", used <= cpus, "" if used <= cpus else
                      f"run on a host with at least {used} CPUs, or re-render with hardware.host_cpus: {cpus} and "
                      "fewer training processes per node"))
    if run_dir is not None:
        rows.append(check_isolation(box, run_dir))
    return rows


_PROBE = """import hashlib, json, sys, types
path, want = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
if hashlib.sha256(data).hexdigest() != want:
    print(json.dumps({"changed": True}))
    raise SystemExit(0)
module = types.ModuleType("rewards_sandbox")
module.__file__ = path
sys.modules["rewards_sandbox"] = module
exec(compile(data, path, "exec"), module.__dict__)
iso = module.detect_isolation()
print(json.dumps({"level": iso.level, "notes": list(iso.notes)}))
"""


def check_isolation(box: dict[str, Any], run_dir: Path) -> Check:
    """The isolation this host grants, probed by the run's own sandbox runner (rewards_sandbox.py's
    detect_isolation) in a throw-away ``python -I`` child that first checks the bytes it runs are the runner this
    config was rendered with; many GPU containers grant no user namespaces."""
    need, why = box["min_isolation"], box.get("why", "")
    path = run_dir / box["file"]
    fix = ("run as root where unshare() is permitted (docker: --cap-add SYS_ADMIN, or --privileged), or lower "
           "min_isolation in the spec and re-run Phase 1 if you accept the weaker isolation")
    try:
        out = subprocess.run([sys.executable, "-I", "-c", _PROBE, str(path), box["sha256"]], capture_output=True,
                             text=True, timeout=120, cwd="/")
        found = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        found = None
    if not isinstance(found, dict) or found.get("changed"):
        what = "differs from the runner this config was rendered with" if isinstance(found, dict) else \
            "could not probe this host"
        return Check("sandbox isolation", f">= {need} ({why})", f"{box['file']} {what}", False,
                     "re-render the rewards and the config (`finetune rewards render`, Phase 1, `finetune config "
                     "render`)" if isinstance(found, dict) else f"run {sys.executable} {path} to see why")
    level = str(found.get("level"))
    ok = level in ISOLATION_LEVELS and ISOLATION_LEVELS.index(level) >= ISOLATION_LEVELS.index(need)
    notes = "; ".join(str(n) for n in found.get("notes") or [])
    return Check("sandbox isolation", f">= {need} ({why})", level + (f" ({notes})" if notes and not ok else ""), ok,
                 "" if ok else fix)


def run_checks(target: dict[str, Any], run_dir: Optional[Path] = None) -> list[Check]:
    rows = [check_python(target)]
    rows += [check_package(p) for p in target.get("packages", [])]
    rows += check_known_bad(target)
    rows += check_gpus(target) + check_scripts(target) + check_tools(target)
    rows += check_sandbox(target, run_dir)
    if run_dir is not None:
        rows += check_inputs(target, run_dir)
    return rows


def load_target(run_dir: Path) -> dict[str, Any]:
    path = run_dir / TARGET
    try:
        target = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(_usage_error(f"{path}: no readable target ({type(exc).__name__}) — fix: run "
                                      "`finetune config render` for this run first")) from None
    if not isinstance(target, dict) or "hardware" not in target or "packages" not in target:
        raise SystemExit(_usage_error(f"{path}: not a target.json written by `finetune config render` — fix: "
                                      "re-render the config"))
    return target


def _usage_error(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return 2


def report(rows: list[Check], target: dict[str, Any], out: Optional[TextIO] = None) -> None:
    out = out or sys.stdout
    title = f"environment for run '{target.get('run', '?')}' ({target.get('summary', '')})"
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title, file=out)
        for r in rows:
            print(f"  [{'ok' if r.ok else 'MISSING'}] {r.what}: need {r.need}; found {r.found}", file=out)
    else:
        table = Table(title=title, title_justify="left")
        for col in ("", "check", "needs", "found"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row("[green]ok[/]" if r.ok else "[red]MISSING[/]", r.what, r.need, r.found)
        Console(file=out, width=max(100, shutil.get_terminal_size((120, 20)).columns)).print(table)
    bad = [r for r in rows if not r.ok]
    for r in bad:  # full lines, never wrapped by the table: they are meant to be copied
        print(f"fix {r.what}: {r.fix}", file=out)
    print(f"not ready: {len(bad)} problem(s)" if bad else "ready: this environment can run the config", file=out)


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(args) > 1:
        return _usage_error("env_check.py takes one argument, the run directory — fix: "
                            "python config/env_check.py [RUN]")
    run_dir = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    try:
        target = load_target(run_dir)
    except SystemExit as exc:
        return int(exc.code or 0)
    rows = run_checks(target, run_dir)
    report(rows, target)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
