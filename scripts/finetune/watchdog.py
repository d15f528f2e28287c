"""The stall watchdog and the one-step dry run of a GRPO run: named moments, each with a time budget.

One module, two homes: `finetune config render` copies it VERBATIM beside train.py as ``config/watchdog.py``
(train.py loads it by path and checks its sha256, like config/watch.py), and the plugin imports it as
``finetune.watchdog`` (the GPU check times the same moments with it). Standard library only.

A run dies or stalls at a few moments: loading the policy, starting the vLLM engine, the weight sync to vLLM (an
NCCL collective TRL gives no timeout), a generation, an optimiser step (a collective of the backward pass or a
reward that never returns). train.py marks each one (:meth:`Watchdog.moment`, :func:`watch_trl` wraps TRL 1.16's
own methods) and a SIDECAR PROCESS, not a thread of the trainer, holds the clock: a Trainer callback — or any
Python thread — cannot run while the main thread is blocked in NCCL or in C code holding the GIL. When a moment
outlives its budget the sidecar

1. signals the trainer (SIGUSR1): ``faulthandler``, registered in it, writes every thread's Python stack to
   ``train/watchdog/stacks-<pid>.txt`` from the signal handler, with no need for the GIL;
2. writes ``train/STALLED.json`` (the first rank to see a stall writes it): the moment, its budget, how long it
   ran, the rank, the stacks file and what usually causes a stall there;
3. stops the run: SIGTERM to the trainer's process group when it leads one (launch.sh under a shell, a test),
   else to the trainer and its descendants (vLLM workers, sandbox zygotes; under ``accelerate launch`` the
   launcher then stops the other ranks), SIGKILL after a grace period.

The sidecar runs in its own session, so the stop never reaches it, and reads the trainer's events from a pipe: a
trainer that exits closes the pipe and the sidecar leaves. ``--dry-run`` (train.py) runs one optimiser step with
the start-up budgets, writes ``train/dryrun.json`` with each moment's first duration, and the real run's bounds are
derived from it (:func:`bounds_from_dry_run`); without one, :data:`BUDGETS` hold.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

STALLED = "STALLED.json"
STALLED_EXIT = 4  # launch.sh's exit status when the watchdog stopped the run
DRY_RUN = "dryrun.json"
FOLDER = "watchdog"  # train/watchdog/: the stacks each stall dumps
OFF_ENV = "FINETUNE_WATCHDOG"  # "off": no watchdog (a person debugging under a debugger)

# the moments, in the order a run meets them, and what usually keeps each from returning
MOMENTS: dict[str, str] = {
    "model_load": "loading the policy (and the reference model) onto the GPUs: a slow or unreachable model "
                  "store, or every rank loading a quantized model whole",
    "vllm_start": "starting vLLM: colocate — the engine's start-up memory check against "
                  "vllm_gpu_memory_utilization; server — `trl vllm-serve` unreachable or the NCCL rendezvous of "
                  "init_communicator on vllm_group_port blocked",
    "weight_sync": "the weight sync to vLLM never returned: an NCCL collective with a rank missing (one crashed or "
                   "is still generating), a blocked port, or P2P / InfiniBand trouble between the GPUs "
                   "(NCCL_DEBUG=INFO; NCCL_P2P_DISABLE=1 to confirm); TRL 1.16 gives this collective no timeout",
    "generation": "a generation made no progress: the vLLM server stopped answering, or a tool / environment "
                  "call the rollout waits on never returns",
    "step": "no optimiser step: a collective of the backward pass or of the reward gather waits on a rank that "
            "stopped, or a reward function blocks",
}

# start-up and in-flight budgets (seconds) when no dry run has measured the run: generous, so a healthy large
# model is never stopped; a dry run tightens them (bounds_from_dry_run)
BUDGETS: dict[str, float] = {"model_load": 3600.0, "vllm_start": 1800.0, "weight_sync": 1800.0,
                             "generation": 3600.0, "step": 7200.0}
FACTOR = 5.0  # a bound is this many times the dry run's measured duration ...
FLOORS: dict[str, float] = {"model_load": 600.0, "vllm_start": 600.0, "weight_sync": 300.0, "generation": 600.0,
                            "step": 900.0}  # ... and never under these (later steps meet longer completions)

# TRL 1.16's methods that ARE the moments (module, class, method, moment); tests check they exist in the installed
# TRL, so a TRL that renames one fails a test instead of leaving a moment unwatched.
TRL_MOMENTS = (
    ("trl.trainer.grpo_trainer", "GRPOTrainer", "__init__", "model_load"),  # the policy, reference model, vLLM
    ("trl.generation.vllm_generation", "VLLMGeneration", "_init_vllm", "vllm_start"),  # colocate LLM() / client
    ("trl.generation.vllm_generation", "VLLMGeneration", "sync_weights", "weight_sync"),
    ("trl.trainer.grpo_trainer", "GRPOTrainer", "_generate", "generation"),  # vLLM, transformers and tool loops
)

POLL_S = 1.0
DUMP_WAIT_S = 2.0  # time the trainer's faulthandler gets to write the stacks before the stop
GRACE_S = 15.0  # SIGTERM → SIGKILL


def budgets_from(overrides: Mapping[str, float] | None = None, dry_run: Mapping[str, Any] | None = None,
                 base: Mapping[str, float] | None = None) -> dict[str, float]:
    """The bounds a run is held to: ``base`` (BUDGETS), tightened by a dry run, then a person's overrides."""
    out = dict(BUDGETS if base is None else base)
    if dry_run:
        out.update(bounds_from_dry_run(dry_run.get("moments") or {}))
    for name, value in (overrides or {}).items():
        if name not in MOMENTS:
            raise ValueError(f"unknown moment {name!r}: one of {', '.join(MOMENTS)}")
        out[name] = float(value)
    return out


def bounds_from_dry_run(moments: Mapping[str, float]) -> dict[str, float]:
    """In-flight bounds from the first durations a dry run measured: FACTOR times each, at least its floor."""
    return {name: max(FLOORS[name], FACTOR * float(seconds)) for name, seconds in moments.items()
            if name in MOMENTS and isinstance(seconds, (int, float))}


def parse_budget(text: str) -> tuple[str, float]:
    """'generation=600' → ('generation', 600.0); ValueError naming the moments otherwise."""
    name, sep, value = text.partition("=")
    if not sep or name.strip() not in MOMENTS:
        raise ValueError(f"--budget {text!r}: expected MOMENT=SECONDS with MOMENT one of {', '.join(MOMENTS)}")
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"--budget {text!r}: {value!r} is not a number of seconds") from None
    if not seconds > 0:
        raise ValueError(f"--budget {text!r}: the budget must be positive")
    return name.strip(), seconds


# ----------------------------------------------------------------------------------------------
# the trainer's side


class Watchdog:
    """Marks the moments of this process and hands them to the sidecar that holds the clock.

    ``moment(name)`` brackets one; ``beat(name)`` restarts a running one (the optimiser step: one per step);
    ``durations`` keeps every measured duration (the dry run reports the first of each), ``peaks`` the most
    memory torch's allocator held during each (when the trainer runs on CUDA)."""

    def __init__(self, budgets: Mapping[str, float], out_dir: Path, *, rank: int = 0, enabled: bool = True,
                 poll_s: float = POLL_S, grace_s: float = GRACE_S, memory: bool = False) -> None:
        self.budgets = {k: float(v) for k, v in budgets.items() if k in MOMENTS}
        self.out_dir, self.rank, self.enabled = Path(out_dir), rank, enabled
        self.poll_s, self.grace_s, self.memory = poll_s, grace_s, memory
        self.durations: dict[str, list[float]] = {}
        self.peaks: dict[str, list[float]] = {}  # GiB torch's allocator held during each moment (CUDA only)
        self._open: dict[str, float] = {}
        self._open_peak: dict[str, float] = {}
        self._pipe: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stacks: IO[str] | None = None

    def start(self, source: bytes | None = None) -> Watchdog:
        """Start the sidecar (``source``: this module's bytes as checked by train.py; default: this file)."""
        if not self.enabled:
            return self
        folder = self.out_dir / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        stacks = folder / f"stacks-{os.getpid()}.txt"
        self._stacks = open(stacks, "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        faulthandler.register(signal.SIGUSR1, file=self._stacks, all_threads=True, chain=False)
        config = {"pid": os.getpid(), "rank": self.rank, "budgets": self.budgets, "out_dir": str(self.out_dir),
                  "stacks": str(stacks), "poll_s": self.poll_s, "grace_s": self.grace_s}
        code = source if source is not None else Path(__file__).read_bytes()
        read, write = os.pipe()
        self._proc = subprocess.Popen([sys.executable, "-I", "-c", _BOOT, json.dumps(config)], stdin=read,
                                      start_new_session=True, close_fds=True)
        os.close(read)
        os.write(write, len(code).to_bytes(8, "big") + code)
        self._pipe = write
        return self

    def _send(self, line: str) -> None:
        if self._pipe is None:
            return
        try:
            os.write(self._pipe, (line + "\n").encode("utf-8"))
        except OSError:  # the sidecar is gone: the run goes on unwatched rather than failing here
            self._pipe = None

    def _fold_memory(self) -> None:
        """With ``memory`` (a dry run): fold the allocator's peak since the last event into every open moment (a
        moment inside another counts for both), then restart the peak. Only when the trainer has CUDA up: this
        module never imports torch."""
        torch = sys.modules.get("torch")
        if not self.memory or torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return
        peak = torch.cuda.max_memory_allocated() / 2**30
        for name in self._open_peak:
            self._open_peak[name] = max(self._open_peak[name], peak)
        torch.cuda.reset_peak_memory_stats()

    def begin(self, name: str) -> None:
        self._fold_memory()
        self._open[name] = time.monotonic()
        self._open_peak[name] = 0.0
        self._send(json.dumps({"begin": name}))

    def end(self, name: str) -> None:
        self._fold_memory()
        started = self._open.pop(name, None)
        peak = self._open_peak.pop(name, None)
        if started is not None:
            self.durations.setdefault(name, []).append(time.monotonic() - started)
        if peak:
            self.peaks.setdefault(name, []).append(peak)
        self._send(json.dumps({"end": name}))

    def beat(self, name: str) -> None:
        """The moment ended and the next of the same kind began (an optimiser step done, the next one running)."""
        self.end(name)
        self.begin(name)

    @contextlib.contextmanager
    def moment(self, name: str) -> Iterator[None]:
        self.begin(name)
        try:
            yield
        finally:
            self.end(name)

    def timed(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` bracketed as moment ``name`` (the wrapper train.py puts on TRL's own methods)."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.moment(name):
                return func(*args, **kwargs)

        wrapper.__watchdog_moment__ = name  # type: ignore[attr-defined]
        return wrapper

    def first(self) -> dict[str, float]:
        """The first measured duration of each moment (what a dry run records)."""
        return {name: round(times[0], 3) for name, times in self.durations.items() if times}

    def summary(self) -> dict[str, dict[str, float]]:
        """Per moment: how many, the first, the longest and its multiple of the first (the margin a bound needs)."""
        return {name: {"count": len(t), "first_s": round(t[0], 3), "max_s": round(max(t), 3),
                       "max_over_first": round(max(t) / t[0], 3) if t[0] > 0 else 0.0}
                for name, t in self.durations.items() if t}

    def close(self) -> None:
        """A normal end: the sidecar leaves without stopping anything; train/watchdog/moments-<pid>.json keeps how
        long each moment took (the margins a dry run's bounds must cover)."""
        if self.enabled and self.durations:
            folder = self.out_dir / FOLDER
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"moments-{os.getpid()}.json").write_text(json.dumps(self.summary(), indent=2) + "\n")
        self._send(json.dumps({"quit": True}))
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._stacks is not None:
            faulthandler.unregister(signal.SIGUSR1)
            self._stacks.close()
            stacks, self._stacks = Path(self._stacks.name), None
            if stacks.stat().st_size == 0:  # no stall: no stacks to keep
                stacks.unlink(missing_ok=True)


def watch_trl(watchdog: Watchdog, trl_moments: tuple[tuple[str, str, str, str], ...] = TRL_MOMENTS) -> list[str]:
    """Wrap TRL's own methods (TRL_MOMENTS) so each call is a moment; returns the moments wired. Idempotent."""
    import importlib

    wired = []
    for module, cls_name, attr, name in trl_moments:
        cls = getattr(importlib.import_module(module), cls_name)
        method = getattr(cls, attr)
        if getattr(method, "__watchdog_moment__", None) != name:
            setattr(cls, attr, watchdog.timed(name, method))
        wired.append(name)
    return wired


def step_callback(watchdog: Watchdog) -> Any:
    """A TrainerCallback beating the ``step`` moment at every optimiser step (the sidecar times the gaps)."""
    from transformers import TrainerCallback

    class StepBeat(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watchdog.begin("step")

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watchdog.beat("step")

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watchdog.end("step")

    return StepBeat()


def dry_run_record(watchdog: Watchdog, train_py_sha256: str, used: list[str]) -> dict[str, Any]:
    """train/dryrun.json: each moment's first duration and the bounds the real run will hold it to."""
    moments = watchdog.first()
    memory = {name: round(p[0], 3) for name, p in watchdog.peaks.items() if p}
    return {"train_py_sha256": train_py_sha256, "moments": moments, "used": used, "peak_allocated_gib": memory,
            "bounds": bounds_from_dry_run(moments), "factor": FACTOR, "floors": FLOORS}


def read_dry_run(path: Path, train_py_sha256: str) -> dict[str, Any] | None:
    """A dry run of THIS train.py (another render's timings say nothing about this one), else None."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and record.get("train_py_sha256") == train_py_sha256
    return record if ok and isinstance(record.get("moments"), dict) else None


def dry_run_table(record: Mapping[str, Any], budgets: Mapping[str, float]) -> str:
    lines = ["| moment | first duration (s) | budget now (s) | bound for the run (s) |", "|---|---:|---:|---:|"]
    for name in MOMENTS:
        took = record["moments"].get(name)
        bound = record["bounds"].get(name)
        lines.append(f"| {name} | {'not used' if took is None else f'{took:.1f}'} | {budgets.get(name, 0):.0f} | "
                     f"{'-' if bound is None else f'{bound:.0f}'} |")
    return "\n".join(lines)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# the sidecar

# The sidecar's program: this module's bytes, length-prefixed, then the trainer's events, on its stdin.
_BOOT = """import json, os, sys, types
def _take(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data
_code = _take(int.from_bytes(_take(8), "big"))
_mod = types.ModuleType("finetune_watchdog_sidecar")
sys.modules[_mod.__name__] = _mod
exec(compile(_code, "watchdog.py", "exec"), _mod.__dict__)
sys.exit(_mod.sidecar_main(json.loads(sys.argv[1])))
"""


def sidecar_main(config: Mapping[str, Any]) -> int:
    """Watch the trainer's moments until it quits (pipe closed or a quit event); stop it on a stall."""
    budgets: dict[str, float] = dict(config["budgets"])
    open_: dict[str, float] = {}
    buffer = b""
    while True:
        ready, _, _ = select.select([0], [], [], float(config["poll_s"]))
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0  # the trainer exited: nothing to watch
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if event.get("quit"):
                    return 0
                if "begin" in event:
                    open_[event["begin"]] = time.monotonic()
                elif "end" in event:
                    open_.pop(event["end"], None)
        late = overdue(open_, budgets, time.monotonic())
        if late is not None:
            stop_run(config, late[0], late[1], budgets[late[0]])
            return 1


def overdue(open_: Mapping[str, float], budgets: Mapping[str, float], now: float) -> tuple[str, float] | None:
    """(moment, seconds running) of the moment furthest past its budget, or None. A moment inside another (a weight
    sync inside a generation) is named itself: the inner one is where the run is."""
    late = [(now - started - budgets[name], name, now - started) for name, started in open_.items()
            if budgets.get(name) and now - started > budgets[name]]
    if not late:
        return None
    _, name, elapsed = max(late)
    return name, elapsed


def stop_run(config: Mapping[str, Any], moment: str, elapsed: float, budget: float) -> None:
    pid = int(config["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)  # the trainer's faulthandler writes every thread's stack
    time.sleep(DUMP_WAIT_S)
    record = {"moment": moment, "budget_s": round(budget, 1), "elapsed_s": round(elapsed, 1),
              "rank": config.get("rank", 0), "pid": pid, "stacks": config["stacks"],
              "cause": MOMENTS.get(moment, ""), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "message": f"stalled at {moment}: no progress for {elapsed:.0f} s (budget {budget:.0f} s) on rank "
                         f"{config.get('rank', 0)}; stacks in {config['stacks']}"}
    write_stalled(Path(config["out_dir"]) / STALLED, record)
    print(f"watchdog: {record['message']} — {record['cause']}", file=sys.stderr, flush=True)
    victims = _targets(pid)
    _signal_all(victims, signal.SIGTERM)
    deadline = time.monotonic() + float(config.get("grace_s", GRACE_S))
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    _signal_all(victims + [("pid", child) for child in _descendants(pid)], signal.SIGKILL)


def write_stalled(path: Path, record: Mapping[str, Any]) -> bool:
    """Create ``path`` unless another rank already did (its stall came first): True when this one wrote it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record, indent=2) + "\n")
    return True


def _targets(pid: int) -> list[tuple[str, int]]:
    """What the stop reaches: the trainer's process group when it leads one, else the trainer and its tree."""
    try:
        if os.getpgid(pid) == pid:
            return [("group", pid)]
    except ProcessLookupError:
        return []
    return [("pid", pid)] + [("pid", child) for child in _descendants(pid)]


def _signal_all(targets: list[tuple[str, int]], sig: int) -> None:
    for kind, ident in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            (os.killpg if kind == "group" else os.kill)(ident, sig)


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier and p not in found]
        found += children
        frontier = children
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return True


def source_sha256() -> str:
    """sha256 of this file as rendered beside train.py."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
