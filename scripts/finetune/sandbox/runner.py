"""Local sandbox for untrusted code (unit-test rewards, code tools, agent-written verifiers and environments).

This file is standalone and stdlib-only on purpose: ``finetune rewards render`` copies it verbatim
beside ``rewards.py`` as ``rewards_sandbox.py`` (self-contained-output contract), and the plugin imports it as
``finetune.sandbox.runner``. It is also its own child-side program: ``python -I -c BOOT --zygote`` runs
this module's compiled code, sent by the parent on stdin (never the file on disk, which may have
changed since the parent loaded and hashed it; nothing is found by module search in a run directory).
Linux only (fork, memfd, pidfd, namespaces).

Public API
==========

``SandboxPool(workers=None, timeout_s=5.0, memory_mb=512, min_isolation="namespaces", *, ...)``
    A context manager (``close()`` stops every process and removes every temp dir). Keyword options:
    ``isolation`` (force a level, at least ``min_isolation``; default: the best the host grants),
    ``max_output_bytes`` (1 MiB per stream; beyond it the execution is killed), ``disk_mb`` (32: work
    dir tmpfs and RLIMIT_FSIZE), ``max_processes`` (32), ``max_open_files`` (64), ``hide_paths``
    (extra directories the candidate must not see, e.g. a dataset outside the working dir),
    ``tmp_root``, ``python`` (the same Python version: children run this module's compiled code),
    ``preimport`` (stdlib modules loaded once in the zygote),
    ``queue_size`` (default 2 x workers).
    ``pool.run_batch(jobs) -> list[Result]`` runs every job of a GRPO step at once, up to ``workers``
    (default: ``default_workers()``) executions in parallel, results in input order; ``pool.run(job)`` runs one.
    ``pool.isolation`` (an ``Isolation``) and ``pool.isolation_level`` say what the host granted.
    Construction raises ``SandboxUnavailable`` (one actionable message) when the host grants less
    than ``min_isolation``; nothing untrusted has run then.
``detect_isolation() -> Isolation``
    What this host grants (``level``, ``notes`` saying what is missing and why), probed in a
    throw-away child interpreter.

Jobs (the candidate is the model's code; tests come from the dataset and stay on the trusted side):

* ``StdioJob(code, tests=[StdioTest(stdin, expected_stdout), ...], compare="lines")`` — the code runs
  as ``__main__`` once per test (one execution each, in parallel) with that stdin; the trusted side
  compares stdout (``exact``; ``lines``: trailing whitespace per line and trailing blank lines
  ignored; ``tokens``: whitespace-separated tokens; ``float``: tokens, those that both read as numbers
  equal within ``abs_tol`` or ``rel_tol`` (``math.isclose``), the rest exactly; ``unordered_lines``:
  the ``lines`` reading in any order). A non-zero exit is a runtime error. ``checker`` (Python source), a
  special judge as competitive programming runs one, replaces ``compare``: after each run that exited 0 it
  runs in the sandbox too, reads ``{"input", "expected", "output"}`` as JSON on stdin and answers with its
  exit code, testlib's: 0 accepted, 1 wrong answer, 2 presentation error; anything else (3 = the checker
  failed, a crash, a timeout) is ``error``, never the candidate's fault.
* ``CallJob(code, function, tests=[CallTest(args, expected, kwargs={}), ...], compare="python")`` —
  one execution; the child receives only the arguments, never the expected values; each return value
  leaves the sandbox as plain data (None/bool/int/float/complex/str/bytes/list/tuple/dict/set/
  frozenset; subclasses and numpy scalars are converted inside the sandbox, so an object whose
  ``__eq__`` always says True arrives as plain data or not at all) and the trusted side compares
  (``python``: ``==``; ``json``: tuples compare equal to lists).
* ``AssertJob(code, tests=[...] | "test source", setup="", entry_point=None)`` — MBPP (``test_list``
  + ``test_setup_code``) or HumanEval (``test`` source + ``entry_point``: ``check(entry_point)``).
  One execution. Asserts are *split* where possible (also inside HumanEval's ``check(candidate)``
  when its body is only asserts): every call of a function that is not a whitelisted pure builtin
  (the candidate's functions), with its arguments, is evaluated in the sandbox and comes back as
  plain data; the rest — literals, operators, comparisons, ``abs/len/sorted/set/round/min/max/sum/
  isinstance ...``, ``math.isclose/fabs ...`` — is evaluated on the trusted side, with guards against
  results that would exhaust it. So ``assert f(x) == [1, 2]``, ``assert abs(candidate(3.5) - 0.5)
  < 1e-6``, ``assert set(f(a, b)) == set((4, 5))``, ``assert math.isclose(area(2), 12.56,
  rel_tol=0.01)`` are judged exactly like ``CallJob``. Not split: free names, comprehensions,
  lambdas, loops, multi-statement tests.
  Any other test runs in-process with the candidate, mitigated: it runs in its own namespace over a
  pristine copy of the builtins, every module the zygote had imported is restored (identity
  checks) before it, its pass counts only with this run's secret token (never printed; stdout is
  never read for verdicts), the exit code is ignored, and ``SystemExit`` / ``os._exit`` before the
  end fails every test not yet recorded. Limit, inherent to running a test in the candidate's
  process: code that walks the harness' frames, ``gc`` referents or uses ``ctypes`` can forge an
  in-process pass; split tests are immune.
* ``ExecJob(code, stdin="", timeout_s=None, max_output_bytes=None)`` — not a test: run a snippet as a
  program and return what it did, for a tool that runs code (``pool.execute(job)`` /
  ``pool.execute_batch(jobs)`` -> ``Execution``: ``status`` (``ok``, ``failed``, ``timeout``,
  ``output_limit``, ``crashed``, ``error``), ``stdout`` exactly, ``stderr`` (its last part),
  ``exit_code``, ``timed_out``, ``stdout_truncated`` / ``stderr_truncated``, ``detail``, ``wall_s``;
  ``as_text()`` is what a tool returns to the model). Same isolation and limits as the test jobs; a
  program writing past ``max_output_bytes`` (per stream) is stopped there. See *Tools* below.
* Timeouts: ``timeout_s`` bounds one execution (one stdin test, or all calls / asserts of one job);
  a job's own ``timeout_s`` overrides the pool's, and a job's own ``memory_mb`` the pool's address-space
  limit (a problem's own limits).

``Result``: ``passed`` (every test passed), ``score`` (fraction of tests passed), ``status``
(``passed``, ``failed``, ``timeout``, ``crashed`` (runtime error, signal, memory), ``output_limit``,
``exited_early``, ``error`` — the sandbox itself failed, not the candidate), ``detail`` (one line),
``wall_s``, ``tests_passed``, ``tests_total``, ``test_statuses``.

Tools (a code-running tool of a user's environment: ``from rewards_sandbox import run_python``)
===================================================================================================

``run_python(code, stdin="", *, timeout_s=None, max_output_bytes=None) -> str``
    Runs the snippet as an ``ExecJob`` in the process's one tool pool and returns the tool's result text
    (``Execution.as_text()``): stdout exactly after a clean run, else stdout and bracketed notes; a sandbox
    that cannot run it is one line (``[sandbox unavailable: ...]``). Never raises.
``execute_python(...) -> Execution``
    The same, for a tool that formats its own result; raises ``SandboxError`` when the sandbox cannot run it.
``tool_pool(*, memory_mb=None, min_isolation=None, workers=None) -> SandboxPool``
    The pool every copy of this module in the process shares (``TOOL_DEFAULTS``: 5 s, 512 MB, 4096 bytes
    per stream, at least ``namespaces``, 2 workers), started on first use; settings are chosen once.
    Raises ``SandboxUnavailable`` (one line, remembered) when the host grants less.
Every call is a fresh process: nothing carries over between calls.

Isolation levels (ordered; ``Isolation.level`` is the best the host grants)
==========================================================================

``process``      a fresh process per execution (fork of a pristine, pre-imported zygote that never
                 runs candidate code: a guard forked from it forks the candidate), its own temp work
                 dir (deleted), scrubbed environment, rlimits (CPU seconds, address space, file size,
                 processes, open files, no core), a wall-clock timeout that kills the process group,
                 capped stdout/stderr, ``no_new_privs``. Root ignores RLIMIT_NPROC and a ``setsid``
                 daemon escapes the group kill, so this level alone is weak.
``unprivileged`` + the candidate runs as its own non-root uid (one per pool slot, never shared with
                 another pool), so RLIMIT_NPROC holds and it cannot signal or read the trusted side;
                 after every execution everything under that uid is killed (``kill(-1)`` as that
                 uid), setsid daemons included. Still shares the host's network and world-writable
                 dirs such as /tmp. Needs root (CAP_SETUID, CAP_SETGID: docker's default).
``namespaces``   + fresh PID, network, mount, IPC and UTS namespaces per execution: the candidate is
                 PID 1 of its namespace, so every descendant dies with it; no network (no interface
                 is up); a root built from an allow-list (``pivot_root``), read-only: /usr, /bin,
                 /sbin, /lib*, /nix, the interpreter's sys.path, library folder and executable, the /etc
                 entries of ``_VIEW_ETC``, a minimal /dev, a fresh /proc, empty /run and /var, and
                 fresh tmpfs scratch dirs (/tmp with the work dir, sized ``disk_mb``; /var/tmp,
                 /dev/shm) that vanish with it — nothing else of the host (no /run/secrets, top-level
                 file, HOME, run dir or dataset; ``hide_paths`` covers a path inside something bound);
                 a seccomp filter (``_seccomp_program``: io_uring, bpf, userfaultfd, keyrings,
                 perf_event_open, setns, mount calls, clone/unshare with CLONE_NEW* denied; x86-64 and
                 aarch64). Needs root with CAP_SYS_ADMIN (docker: ``--cap-add SYS_ADMIN`` or
                 ``--privileged``); a host that cannot build all of it is below this level.

Agent-written code (``AgentHost``, ``agent_host``, ``environment_class``, ``provide_sources``)
=============================================================================================

A `type: python` verifier, an environment file and their own modules run in a sandboxed interpreter of their
own: the same view (the run folder readable), the filter (plus flock), no network, no environment variable but
the allowed ones, root or a user namespace of its own; every batch or episode a fresh fork ("session") with
fresh scratch. ``AgentHost(sources, folder=, allow_env=)``; ``host.session(renew=False).call(op, ...)``;
``environment_class(host, module, name)`` (stand-ins with the real tools' schemas); ``AgentCodeRefused`` when
the sandbox cannot be built or the code does not import in it: agent code never runs outside it.

Not isolated at any level: CPU caches/timing side channels, and the zygote's freed heap (earlier
requests' code and inputs — never expected outputs, which stay on the trusted side).
"""

from __future__ import annotations

import ast
import atexit
import json
import logging
import marshal
import math
import os
import queue
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

__all__ = [
    "ISOLATION_LEVELS", "Isolation", "SandboxError", "SandboxUnavailable", "detect_isolation",
    "StdioTest", "StdioJob", "CallTest", "CallJob", "AssertJob", "Job", "Result", "SandboxPool",
    "ExecJob", "Execution", "TOOL_DEFAULTS", "tool_pool", "execute_python", "run_python",
    "AgentCodeRefused", "AgentCallError", "AgentTimeout", "AgentHost", "AgentSession", "agent_host",
    "agent_sources", "provide_sources", "environment_class",
]

ISOLATION_LEVELS = ("process", "unprivileged", "namespaces")

# This module's code as this process compiled it (from the bytes it was loaded from): what children run.
_OWN_CODE = sys._getframe(0).f_code
# A child's whole program: read the parent's code object from stdin (8-byte length, marshal bytes), drop
# any path entry naming the working directory, run it as __main__ with the remaining arguments.
_BOOT = """import marshal, os, sys
def _take(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("sandbox: no code on stdin")
        data += chunk
    return data
sys.path[:] = [p for p in sys.path if p and p != "." and os.path.abspath(p) != os.getcwd()]
__file__ = sys.argv.pop(1)
exec(marshal.loads(_take(int.from_bytes(_take(8), "big"))), globals())
"""


def _own_code_blob() -> bytes:
    """What a child reads on stdin before anything else: this module's code, length-prefixed."""
    blob = marshal.dumps(_OWN_CODE)
    return len(blob).to_bytes(8, "big") + blob


def _child_argv(python: str, flags: Sequence[str], *args: str) -> list[str]:
    """The command line of a child running this module's code (sent on its stdin) with ``args``."""
    return [python, *flags, "-c", _BOOT, os.path.abspath(__file__), *args]

# Uids for candidates: far above any real account; one block per (trusted process, live pool) so two
# pools (one per training rank, or two in one process) never share a uid; one uid per pool slot.
# 2e9 + 2**20 pids * 16 pools * 128 slots stays below the largest valid uid (2**32 - 2).
_UID_BASE = 2_000_000_000
_UID_BLOCK = 128
_POOLS_PER_PROCESS = 16
# The registry lives on `sys`, not in this module: the runner is imported both as
# finetune.sandbox.runner and as rewards_sandbox (and the inspector may re-import a fresh copy), and
# every copy in one process must see the same claimed indices or two live pools could share a uid.
_pool_indices, _pool_indices_lock = sys.__dict__.setdefault(
    "_llm_finetuning_sandbox_pool_indices", (set(), threading.Lock()))


def _uid_block(pool_index: int) -> int:
    return _UID_BASE + ((os.getpid() % (1 << 20)) * _POOLS_PER_PROCESS + pool_index) * _UID_BLOCK


def _claim_pool_index() -> int:
    with _pool_indices_lock:
        free = [i for i in range(_POOLS_PER_PROCESS) if i not in _pool_indices]
        if not free:
            raise SandboxError(f"at most {_POOLS_PER_PROCESS} sandbox pools may be open in one process")
        _pool_indices.add(free[0])
        return free[0]


_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS = 38

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_STDERR_KEEP = 2000
_SETUP_FAILED_EXIT = 71

# Stdlib modules solutions commonly use, imported once in the zygote so a fork needs no import time.
DEFAULT_PREIMPORT = (
    "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "random",
    "fractions", "decimal", "typing", "operator", "copy", "statistics", "datetime", "array", "io",
    "traceback", "cmath", "dataclasses", "enum", "textwrap", "unicodedata", "hashlib", "struct",
)


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the candidate)."""


class SandboxUnavailable(SandboxError):
    """The host grants less isolation than the configured minimum; nothing was run."""


# --------------------------------------------------------------------------------------------------
# Isolation probing (runs in a child: unshare() changes the caller)
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Isolation:
    """What the host grants. ``level`` is the best of ISOLATION_LEVELS available; ``notes`` say why."""

    level: str
    root: bool
    setuid: bool
    namespaces: bool
    readonly_root: bool
    notes: tuple[str, ...] = ()

    def at_least(self, minimum: str) -> bool:
        """True when this isolation is at or above ``minimum``."""
        return ISOLATION_LEVELS.index(self.level) >= ISOLATION_LEVELS.index(minimum)

    def describe(self) -> str:
        """One line for logs and reports."""
        extra = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"sandbox isolation: {self.level}{extra}"


_LIBC: list[Any] = []


def _libc() -> tuple[Any, Any]:
    """(ctypes, libc), loaded once — in the zygote, before it forks: loading costs ~10 ms per process."""
    if not _LIBC:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("unshare", "mount", "prctl"):
            getattr(libc, name)
        libc.getpid()
        _LIBC.extend((ctypes, libc))
    return _LIBC[0], _LIBC[1]


def _check(ctypes: Any, rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    ctypes, libc = _libc()
    _check(ctypes, libc.unshare(flags), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    ctypes, libc = _libc()

    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(ctypes, libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _prctl(option: int, arg: int) -> None:
    ctypes, libc = _libc()
    _check(ctypes, libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                              ctypes.c_ulong(0)), "prctl")


def _drop_privileges(uid: int) -> None:
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("setuid did not take effect")


def _fork_probe(fn: Callable[[], object]) -> str | None:
    """Run ``fn`` in a forked child; None on success, else the child's error text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - report any failure to the parent
            os.write(w, f"{type(exc).__name__}: {exc}".encode()[:500])
            os._exit(1)
    os.close(w)
    msg = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        msg += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return msg.decode(errors="replace") or f"exit status {status}"


def _probe(uid: int) -> Isolation:
    """Probe in children what this host grants (called in the zygote and by detect_isolation)."""
    notes = []
    root = os.geteuid() == 0
    setuid_err = _fork_probe(lambda: _drop_privileges(uid)) if root else "not running as root"
    if setuid_err:
        notes.append(f"cannot switch to an unprivileged uid: {setuid_err}")

    def isolated() -> None:  # what a candidate gets at the namespaces level: the view, the uid, the filter
        _enter_view(_plan_view(_interpreter_paths()), 1, uid)
        _drop_privileges(uid)
        _apply_seccomp()

    def ns_probe() -> None:
        _unshare(_CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS)
        error = _fork_probe(isolated)
        if error:
            raise OSError(error)

    ns_err = _fork_probe(ns_probe) if root and not setuid_err else (setuid_err or "not running as root")
    if not ns_err and not os.path.isdir(_STAGE):
        ns_err = f"no {_STAGE} directory to assemble the sandbox's root on"
    if not ns_err and os.uname().machine not in _SECCOMP_ARCHES:
        ns_err = f"no system-call filter for {os.uname().machine} (x86_64 and aarch64 only)"
    if ns_err:
        notes.append(f"no PID/network/mount namespaces with the sandbox's view and system-call filter: {ns_err}")
    if setuid_err:
        level = "process"
    elif ns_err:
        level = "unprivileged"
    else:
        level = "namespaces"
    return Isolation(level=level, root=root, setuid=setuid_err is None, namespaces=ns_err is None,
                     readonly_root=ns_err is None, notes=tuple(notes))


def detect_isolation(python: str | None = None) -> Isolation:
    """Report what isolation this host grants, probed in a throw-away child interpreter."""
    out = subprocess.run(_child_argv(python or sys.executable, ("-I", "-S"), "--probe"), input=_own_code_blob(),
                         capture_output=True, timeout=60, env=_zygote_env(), cwd="/")
    if out.returncode != 0:
        raise SandboxError(f"isolation probe failed: {out.stderr.decode(errors='replace').strip()[-500:]}")
    data = json.loads(out.stdout)
    data["notes"] = tuple(data["notes"])
    return Isolation(**data)


# --------------------------------------------------------------------------------------------------
# Child side: the sandbox's view of the file system, its system-call filter, limits, harness
# --------------------------------------------------------------------------------------------------

# Top-level entries of the host's root that a sandboxed process sees, read-only: the interpreter, its libraries
# and the dynamic linker live there. Nothing else at / exists in the sandbox's root: not /work, /data, /home,
# /root, /opt, /srv, /mnt, /media, /run (Docker and Kubernetes secrets), /var, /sys, /boot, nor a top-level file.
_VIEW_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "nix")
# /etc entries the C library and Python read (the dynamic linker's cache, the time zone, user and group names,
# host names, MIME types, the OS name, Debian's alternatives and python3.X); no other /etc entry is there.
_VIEW_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group",
             "nsswitch.conf", "host.conf", "hosts", "mime.types", "os-release", "alternatives")
_VIEW_ETC_PREFIX = "python"
# A minimal /dev: these nodes (bound from the host's), /dev/shm scratch and the /proc/self/fd links. No
# /dev/fuse, /dev/net/tun, disks, terminals or GPUs.
_VIEW_DEVICES = ("null", "zero", "full", "random", "urandom")
_VIEW_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                   "stderr": "/proc/self/fd/2"}
# Scratch dirs get a fresh, writable tmpfs per execution (size in MB; None = the request's disk_mb).
_SCRATCH_DIRS = {"/tmp": None, "/var/tmp": 8, "/dev/shm": 8}
_NS_WORKDIR = "/tmp/work"
# The new root is assembled on a tmpfs mounted here, then made the root (pivot_root); the old root is detached.
_STAGE = "/tmp"
_MNT_DETACH = 2
_PIVOT_ROOT_NR = {"x86_64": 155, "aarch64": 41}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _plan_view(needed: Sequence[str], readable: Sequence[str] = (), hide: Sequence[str] = ()) -> dict[str, Any]:
    """What the sandbox's root holds, as plain data (computed on the trusted side, applied by _enter_view):
    ``binds`` — host paths bound read-only at the same place: the system directories of _VIEW_SYSTEM, then
    ``needed`` (the interpreter's sys.path and library folder) and ``readable`` outside them, each at its path
    as given and, when that differs, its real path; ``links`` — top-level symlinks copied (/bin → usr/bin);
    ``etc`` — the _VIEW_ETC entries present (name → None to bind, or a symlink's target); ``hide`` — paths inside
    something bound, covered by an empty read-only tmpfs (anything needed below them is bound back after)."""
    links: dict[str, str] = {}
    binds: list[str] = []
    for name in _VIEW_SYSTEM:
        path = "/" + name
        if os.path.islink(path):
            links[path] = os.readlink(path)
        elif os.path.isdir(path):
            binds.append(path)
    system = [os.path.realpath(p) for p in binds] + [os.path.realpath(p) for p in links]
    for path in [*needed, *readable]:
        if not path or not os.path.exists(path):
            continue
        for form in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
            if not any(_under(form, s) for s in system):
                binds.append(form)
    shown = [*binds, *system]
    hidden = sorted({os.path.abspath(h) for h in hide if h and os.path.exists(h)
                     and any(os.path.abspath(h) != b and _under(os.path.abspath(h), b) for b in shown)})
    hidden = [h for h in hidden if not any(h != o and _under(h, o) for o in hidden)]
    # a path inside another bind is bound with it, unless a hidden path between them covers it (then again)
    binds = [b for b in dict.fromkeys(binds)
             if not any(b != o and _under(b, o) and not any(_under(b, h) and _under(h, o) for h in hidden)
                        for o in binds)]
    etc: dict[str, str | None] = {}
    try:
        entries = sorted(os.listdir("/etc"))
    except OSError:
        entries = []
    for name in entries:
        if name in _VIEW_ETC or name.startswith(_VIEW_ETC_PREFIX):
            path = os.path.join("/etc", name)
            etc[name] = os.readlink(path) if os.path.islink(path) else None
    return {"binds": binds, "links": links, "etc": etc, "hide": hidden,
            "devices": [d for d in _VIEW_DEVICES if os.path.exists("/dev/" + d)]}


def _interpreter_paths() -> list[str]:
    """What a sandboxed interpreter needs to see: its sys.path, its own library folder (the shared libraries its
    extension modules load lazily), and the executable with its venv's pyvenv.cfg (``sys.executable`` in a
    subprocess starts the same environment)."""
    return [*sys.path, os.path.join(sys.base_exec_prefix, "lib"), sys.executable,
            os.path.join(sys.prefix, "pyvenv.cfg")]


def _mount_points() -> dict[str, str]:
    """Mount point -> per-mount options, from /proc/self/mountinfo (its octal escapes decoded)."""
    import re

    points = {}
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 5:
                points[re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])] = parts[5]
    return points


def _remount_readonly(skip: Sequence[str] = ()) -> None:
    """Make every mount of this (private) mount namespace read-only except ``skip``, keeping nosuid / nodev /
    noexec (in a user namespace a remount must keep the flags the mount was locked with)."""
    keep = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}
    for point, options in sorted(_mount_points().items(), key=lambda kv: len(kv[0])):
        if point in skip or "ro" in options.split(","):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for opt in options.split(","):
            flags |= keep.get(opt, 0)
        _mount(None, point, None, flags)


def _bind_into(root: str, path: str, fd: int) -> None:
    """Bind the host object open as ``fd`` (a directory or a file) at ``root + path``."""
    target = root + path
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o444))
    _mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC)


def _build_root(root: str, plan: dict[str, Any], fds: dict[str, int], disk_mb: int) -> None:
    """Fill the new root (a tmpfs at ``root``): /proc, the scratch dirs, then binds (a venv or run folder under
    /tmp lands on the scratch tmpfs, read-only) and hidden paths, links, /etc, /dev."""
    flags = _MS_NOSUID | _MS_NODEV
    for path in ("/proc", "/run", "/var", "/dev", "/etc"):
        os.makedirs(root + path, 0o755, exist_ok=True)
    _mount("proc", root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount("sandbox", root + "/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "size=64k,mode=0755")
    for path, size in _SCRATCH_DIRS.items():
        os.makedirs(root + path, 0o755, exist_ok=True)
        _mount("sandbox", root + path, "tmpfs", flags,
               f"size={min(size or disk_mb, disk_mb)}m,mode=1777,nr_inodes=4096")
    for path in sorted([*plan["binds"], *plan["hide"]], key=lambda p: (p.count("/"), p not in plan["hide"])):
        if path in plan["hide"]:
            _mount("sandbox", root + path, "tmpfs", flags | _MS_RDONLY, "size=4k,mode=0755")
        else:
            _bind_into(root, path, fds[path])
    for path, target in plan["links"].items():
        os.symlink(target, root + path)
    for name, target in plan["etc"].items():
        if target is not None:
            os.symlink(target, f"{root}/etc/{name}")
        elif "/etc/" + name in fds:
            _bind_into(root, "/etc/" + name, fds["/etc/" + name])
    for name in plan["devices"]:
        _bind_into(root, "/dev/" + name, fds["/dev/" + name])
    for name, target in _VIEW_DEV_LINKS.items():
        os.symlink(target, f"{root}/dev/{name}")


def _enter_view(plan: dict[str, Any], disk_mb: int, owner: int) -> str:
    """In the new PID namespace's init, still privileged (root, or root of its own user namespace): a private
    mount namespace whose root holds only what ``plan`` lists, every mount read-only but the scratch tmpfs, the
    host's root detached. Returns the work dir (``/tmp/work``, owned by ``owner``)."""
    _unshare(_CLONE_NEWNS)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    sources = [*plan["binds"], *(f"/etc/{n}" for n, t in plan["etc"].items() if t is None),
               *(f"/dev/{d}" for d in plan["devices"])]
    fds = {}
    for path in sources:  # opened before the staging tmpfs covers /tmp (a venv there stays reachable)
        try:
            fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            if path.startswith("/etc/"):
                continue  # gone since planned: simply absent
            raise
    _mount("sandbox", _STAGE, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
    try:
        _build_root(_STAGE, plan, fds, disk_mb)
    finally:
        for fd in fds.values():
            os.close(fd)
    os.chdir(_STAGE)
    os.mkdir(".old")
    ctypes, libc = _libc()
    _check(ctypes, libc.syscall(_PIVOT_ROOT_NR[os.uname().machine], b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(ctypes, libc.umount2(b"/.old", _MNT_DETACH), "umount2")
    os.rmdir("/.old")
    _remount_readonly(skip=tuple(_SCRATCH_DIRS))
    os.mkdir(_NS_WORKDIR, 0o700)
    os.chown(_NS_WORKDIR, owner, owner)
    return _NS_WORKDIR


# The system-call filter every sandboxed process runs under (seccomp, classic BPF built here: no libseccomp).
# Denied with EPERM: io_uring (its own path around every other check), bpf, userfaultfd, the kernel keyrings,
# perf_event_open, joining or creating namespaces (setns; clone / unshare with a CLONE_NEW* flag: a fresh user
# namespace would give the process capabilities again) and every mount call. clone3 gets ENOSYS: its flags sit
# in memory the filter cannot read, and the C library then falls back to clone. Any other system-call ABI (i386
# through int 0x80, x32) gets ENOSYS. Numbers from the kernel's asm/unistd_64.h and asm-generic/unistd.h.
_SECCOMP_DENIED = ("io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "userfaultfd", "keyctl",
                   "add_key", "request_key", "perf_event_open", "setns", "mount", "umount2", "pivot_root",
                   "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
_SECCOMP_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "bpf": 321, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
        "request_key": 249, "perf_event_open": 298, "mount": 165, "umount2": 166, "pivot_root": 155,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "flock": 73}),
    "aarch64": (0xC00000B7, {
        "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "bpf": 280, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
        "request_key": 218, "perf_event_open": 241, "mount": 40, "umount2": 39, "pivot_root": 41,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "flock": 32}),
}
# Agent-written code also sees the run folder: flock, which the plugin's run lock uses (finetune.locks), is denied
# there too, so that code can neither hold a trusted command's lock nor wait on one.
_SECCOMP_DENIED_AGENT = ("flock",)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
_X32_SYSCALL_BIT = 0x40000000
_BPF_LD_ABS, _BPF_JEQ, _BPF_JGE, _BPF_JSET, _BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
_SECCOMP_ALLOW, _SECCOMP_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _seccomp_arch_block(numbers: dict[str, int], x32: bool,
                        extra: Sequence[str] = ()) -> list[tuple[int, int, int, int]]:
    """The filter's checks for one ABI (accumulator: the system-call number); ends in a return."""
    deny, nosys = _SECCOMP_ERRNO | _EPERM, _SECCOMP_ERRNO | _ENOSYS
    block = [(_BPF_LD_ABS, 0, 0, 0)]  # seccomp_data.nr
    if x32:
        block += [(_BPF_JGE, 0, 1, _X32_SYSCALL_BIT), (_BPF_RET, 0, 0, nosys)]
    block += [(_BPF_JEQ, 0, 1, numbers["clone3"]), (_BPF_RET, 0, 0, nosys)]
    for name in (*_SECCOMP_DENIED, *extra):
        block += [(_BPF_JEQ, 0, 1, numbers[name]), (_BPF_RET, 0, 0, deny)]
    for name in ("clone", "unshare"):  # flags in the first argument's low word (seccomp_data.args[0], LE)
        block += [(_BPF_JEQ, 0, 4, numbers[name]), (_BPF_LD_ABS, 0, 0, 16), (_BPF_JSET, 0, 1, _CLONE_NS_FLAGS),
                  (_BPF_RET, 0, 0, deny), (_BPF_RET, 0, 0, _SECCOMP_ALLOW)]
    return block + [(_BPF_RET, 0, 0, _SECCOMP_ALLOW)]


def _seccomp_program(extra: Sequence[str] = ()) -> list[tuple[int, int, int, int]]:
    """The whole filter: dispatch on seccomp_data.arch to the x86-64 or the aarch64 block, else ENOSYS; ``extra``:
    more calls denied (_SECCOMP_DENIED_AGENT for agent-written code)."""
    program = [(_BPF_LD_ABS, 0, 0, 4)]  # seccomp_data.arch
    for machine, (audit_arch, numbers) in _SECCOMP_ARCHES.items():
        block = _seccomp_arch_block(numbers, x32=machine == "x86_64", extra=extra)
        program += [(_BPF_JEQ, 0, len(block), audit_arch), *block]
    return program + [(_BPF_RET, 0, 0, _SECCOMP_ERRNO | _ENOSYS)]


def _apply_seccomp(extra: Sequence[str] = ()) -> None:
    """Install the filter on this (single-threaded) process and its future children; it cannot be removed."""
    import struct

    ctypes, libc = _libc()
    program = _seccomp_program(extra)
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in program))
    # struct sock_fprog {unsigned short len; struct sock_filter *filter;} on a 64-bit ABI
    fprog = ctypes.create_string_buffer(struct.pack("=H6xQ", len(program), ctypes.addressof(code)))
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _check(ctypes, libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER),
                              ctypes.c_void_p(ctypes.addressof(fprog)), ctypes.c_ulong(0), ctypes.c_ulong(0)),
           "seccomp")


_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, _PR_SET_DUMPABLE = 24, 47, 4, 4


def _drop_capabilities() -> None:
    """Root of a user namespace of our own, after building the view: no capability left (bounding, ambient,
    effective, permitted, inheritable), so the read-only mounts stay read-only and no execve regains any."""
    ctypes, libc = _libc()
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such capability
            _check(ctypes, -1, "dropping a capability")
    libc.prctl(_PR_CAP_AMBIENT, ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0))
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(ctypes, libc.capset(header, data), "capset")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def _enter_user_namespace(flags: int) -> None:
    """unshare(CLONE_NEWUSER | flags) as a user without privileges: this uid and gid map to themselves."""
    uid, gid = os.getuid(), os.getgid()
    _unshare(0x10000000 | flags)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _set_limits(req: dict[str, Any], processes_ok: bool) -> None:
    import resource

    cpu = int(math.ceil(req["timeout_s"])) + 1
    mem = req["memory_mb"] * 1024 * 1024
    disk = req["disk_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
    resource.setrlimit(resource.RLIMIT_NOFILE, (req["max_open_files"], req["max_open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes_ok:
        resource.setrlimit(resource.RLIMIT_NPROC, (req["max_processes"], req["max_processes"]))


def _make_encoder() -> Callable[..., Any]:
    """A closure that turns a return value into plain JSON-able data, built before candidate code runs."""
    _type, _isinstance, _repr = type, isinstance, repr
    _int, _float, _str, _bytes, _complex = int, float, str, bytes, complex
    _list, _tuple, _dict, _set, _frozenset, _bool = list, tuple, dict, set, frozenset, bool
    int_conv, float_conv, str_conv = int.__int__, float.__float__, str.__str__
    list_iter, tuple_iter, dict_items = list.__iter__, tuple.__iter__, dict.items
    set_iter, fset_iter = set.__iter__, frozenset.__iter__

    def enc(x: Any, depth: int = 0) -> Any:
        if depth > 100:
            raise ValueError("return value nested more than 100 levels")
        t = _type(x)
        if x is None or t is _bool:
            return x
        if _isinstance(x, _int):
            return int_conv(x)
        if _isinstance(x, _float):
            return {"f": _repr(float_conv(x))}
        if _isinstance(x, _str):
            return str_conv(x)
        if t is _bytes:
            return {"b": x.hex()}
        if t is _complex:
            return {"c": [_repr(x.real), _repr(x.imag)]}
        if _isinstance(x, _list):
            return [enc(v, depth + 1) for v in list_iter(x)]
        if _isinstance(x, _tuple):
            return {"t": [enc(v, depth + 1) for v in tuple_iter(x)]}
        if _isinstance(x, _dict):
            return {"d": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in dict_items(x)]}
        if _isinstance(x, _frozenset):
            return {"fs": [enc(v, depth + 1) for v in fset_iter(x)]}
        if _isinstance(x, _set):
            return {"s": [enc(v, depth + 1) for v in set_iter(x)]}
        if getattr(t, "__module__", "") == "numpy" and hasattr(x, "item") and hasattr(x, "dtype") \
                and getattr(x, "ndim", 1) == 0:
            # A numpy scalar: .item() runs here, in the sandbox, and must itself yield plain data.
            return enc(x.item(), depth + 1)
        raise TypeError(f"a value of type {t.__name__} cannot leave the sandbox (plain data only)")

    return enc


def _run_script(code: str, filename: str = "<solution>") -> int:
    """A stdin/stdout program run as ``__main__``; its exit code, as the interpreter would give it."""
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, filename, "exec"), ns)
    except SystemExit as exc:
        sys.stdout.flush()
        status = exc.code
        if status is not None and not isinstance(status, int):
            print(status, file=sys.stderr)  # sys.exit("message"): the interpreter prints it
        return status if isinstance(status, int) else (0 if status is None else 1)
    except BaseException as exc:  # noqa: BLE001 - report like the interpreter would
        import traceback

        sys.stdout.flush()
        # Without this frame: the traceback starts in the program, as `python file.py` prints it (the harness'
        # own path is nothing the program's reader needs).
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        return 1
    sys.stdout.flush()
    return 0


def _candidate_main(req: dict[str, Any], res_fd: int) -> int:
    """Runs in the candidate process after isolation is in place. Returns the exit code."""
    import random

    random.seed()  # the zygote's random state must not be shared between executions
    write, dumps, exc_line = os.write, json.dumps, _exception_line
    if req["mode"] == "script":
        return _run_script(req["code"], req.get("filename", "<solution>"))

    # "steps": load the candidate module, then evaluate each step; one JSON record per step on res_fd.
    # Test code runs in its own namespace over pristine builtins, and before each in-process test the
    # modules the zygote had imported are put back as they were, so monkeypatching builtins or stdlib
    # modules cannot make a test pass.
    token, steps, encode = req["token"], req["steps"], _make_encoder()
    decode, restore = _decode_value, _make_restorer()
    pristine = _PRISTINE
    test_ns: dict[str, Any] = {"__name__": "__test__", "__builtins__": dict(pristine["builtins"])}

    def emit(record: dict[str, Any]) -> None:
        # A leading newline ends any partial line the candidate may have written to this fd.
        data = b"\n" + dumps(record).encode() + b"\n"
        while data:
            data = data[write(res_fd, data):]

    cand_ns: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}
    workdir, chdir, listdir, rmtree = os.getcwd(), os.chdir, os.listdir, shutil.rmtree
    try:
        exec(compile(req["code"], "<solution>", "exec"), cand_ns)
        # Files the answer wrote while loading cannot satisfy a test that checks what a call writes.
        restore()
        chdir(workdir)
        for entry in listdir(workdir):
            path = os.path.join(workdir, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                rmtree(path)
            else:
                os.unlink(path)
    except BaseException as exc:  # noqa: BLE001 - SystemExit here means the tests never ran
        emit({"load": False, "e": exc_line(exc), "exit": isinstance(exc, SystemExit)})
        emit({"done": token})
        return 0
    emit({"load": True})
    modules = pristine["modules"]
    for name, value in dict.items(cand_ns):
        if name != "__builtins__":
            # A name bound to a module the zygote knew is given the pristine module, not the candidate's.
            test_ns[name] = modules[name][0] if name in modules else value
    for index, step in enumerate(steps):
        kind = step["k"]
        try:
            if kind == "exec":
                restore()
                exec(compile(step["src"], "<test setup>", "exec"), test_ns)
                continue
            if kind == "assert":
                restore()
                exec(compile(step["src"], "<test>", "exec"), test_ns)
                emit({"i": index, "ok": True, "tk": token})
                continue
            if kind == "eval":
                value = eval(compile(step["src"], "<test>", "eval"), test_ns)
            else:  # "call"
                fn = cand_ns[step["fn"]]
                value = fn(*decode(step["args"]), **decode(step["kwargs"]))
            emit({"i": index, "ok": True, "v": encode(value)})
        except BaseException as exc:  # noqa: BLE001 - a failing test, whatever it raised
            if kind != "exec":
                emit({"i": index, "ok": False, "e": exc_line(exc)})
    emit({"done": token})
    return 0


# Filled in the zygote before it forks anything: the modules and builtins as no candidate has seen them.
_PRISTINE: dict[str, Any] = {"modules": {}, "builtins": {}}


def _snapshot_pristine() -> None:
    import builtins

    _PRISTINE["builtins"] = dict(builtins.__dict__)
    _PRISTINE["modules"] = {name: (mod, dict(mod.__dict__)) for name, mod in list(sys.modules.items())
                            if name != "sys" and type(getattr(mod, "__dict__", None)) is dict}


def _make_restorer() -> Callable[[], None]:
    """A closure putting every snapshotted module (and its attributes) back; identity checks only, so
    hostile objects' __eq__ never runs."""
    modules, sys_modules, missing = _PRISTINE["modules"], sys.modules, object()
    dict_get, items = dict.get, dict.items

    def restore() -> None:
        for name, (mod, saved) in items(modules):
            if dict_get(sys_modules, name) is not mod:
                sys_modules[name] = mod
            current = mod.__dict__
            for key, value in items(saved):
                if dict_get(current, key, missing) is not value:
                    current[key] = value

    return restore


def _exception_line(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(exc).__name__


def _child_after_fork(req: dict[str, Any], cfg: dict[str, Any], workdir: str, fds: dict[str, Any]) -> None:
    """The candidate process: isolate, then run. Never returns."""
    try:
        os.setsid()
        level = cfg["level"]
        if level == "namespaces":
            workdir = _enter_view(cfg["view"], req["disk_mb"], cfg["uid"])
        _set_limits(req, processes_ok=level != "process")
        os.dup2(fds["stdin"], 0)
        os.dup2(fds["stdout"], 1)
        os.dup2(fds["stderr"], 2)
        os.dup2(fds["result"], 3)
        setup_fd = fds["setup"]
        if level != "process":
            _drop_privileges(cfg["uid"])
        else:
            _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        if level == "namespaces":
            _apply_seccomp()
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update({"PATH": _SAFE_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
                           "PYTHONIOENCODING": "utf-8"})
        import io

        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                      line_buffering=True)
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(0)
        sys.argv = ["solution.py"]
        os.closerange(4, setup_fd)
        os.closerange(setup_fd + 1, 1 << 16)
        os.close(setup_fd)  # from here on nothing the candidate does can claim a sandbox failure
    except BaseException as exc:  # noqa: BLE001 - never run the candidate half-isolated
        try:
            os.write(fds["setup"], _exception_line(exc).encode())
        finally:
            os._exit(_SETUP_FAILED_EXIT)
    code = 1
    try:
        code = _candidate_main(req, 3)
    except BaseException:  # noqa: BLE001
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code if 0 <= code < 256 else 1)


def _kill_uid(uid: int) -> None:
    """Kill every process running as ``uid`` (setsid daemons included): kill(-1) from that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(3):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _execute(req: dict[str, Any], cfg: dict[str, Any], base_dir: str, seq: int) -> dict[str, Any]:
    """In the guard process (a fork of the zygote, still trusted): run one execution, return the report."""
    started = time.monotonic()
    level, uid = cfg["level"], cfg["uid"]
    workdir = os.path.join(base_dir, f"run{seq}")  # in the namespaces level: a tmpfs inside the sandbox
    _make_workdir(workdir, level, uid)
    stdin_fd = _stdin_memfd(req.get("stdin", ""))
    candidate, pipes = _spawn_candidate(req, cfg, workdir, stdin_fd)
    max_out = req["max_output_bytes"]
    caps = {pipes["stdout"]: max_out, pipes["stderr"]: max_out,
            pipes["result"]: max(max_out, 1 << 20) * 4, pipes["setup"]: 4096}
    bufs, timed_out, overflow = _collect(candidate, caps, {fd: name for name, fd in pipes.items()},
                                         deadline=started + req["timeout_s"])
    if not candidate.exited:
        candidate.kill_all()
        candidate.reap()
    for fd in list(caps) + ([candidate.pidfd] if candidate.pidfd is not None else []):
        try:
            os.close(fd)
        except OSError:
            pass
    shutil.rmtree(workdir, ignore_errors=True)
    return _report({name: bufs[fd] for name, fd in pipes.items()}, candidate.status, timed_out, overflow, started,
                   req.get("stderr_keep", _STDERR_KEEP))


def _make_workdir(workdir: str, level: str, uid: int) -> None:
    """The candidate's private working directory (the namespaces level mounts a tmpfs there itself)."""
    if level != "namespaces":
        os.mkdir(workdir, 0o700)
        if level == "unprivileged":
            os.chown(workdir, uid, uid)


def _stdin_memfd(text: str) -> int:
    """An anonymous file holding the candidate's stdin, rewound (never a pipe: a large stdin cannot block)."""
    stdin_fd = os.memfd_create("stdin")
    data = text.encode("utf-8", "replace")
    while data:
        data = data[os.write(stdin_fd, data):]
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    return stdin_fd


def _spawn_candidate(req: dict[str, Any], cfg: dict[str, Any], workdir: str,
                     stdin_fd: int) -> tuple[_Candidate, dict[str, int]]:
    """Fork the candidate (into fresh namespaces at that level); the guard keeps the read ends of its pipes."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    setup_r, setup_w = os.pipe()
    if cfg["level"] == "namespaces":
        _unshare(_CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS)
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, res_r, setup_r):
            os.close(fd)
        _child_after_fork(req, cfg, workdir, {"stdin": stdin_fd, "stdout": out_w, "stderr": err_w,
                                              "result": res_w, "setup": setup_w})
    for fd in (stdin_fd, out_w, err_w, res_w, setup_w):
        os.close(fd)
    return _Candidate(pid, cfg["level"], cfg["uid"]), {"stdout": out_r, "stderr": err_r, "result": res_r,
                                                       "setup": setup_r}


class _Candidate:
    """The forked candidate as the guard sees it: exit checks, reaping, and killing everything it started."""

    def __init__(self, pid: int, level: str, uid: int) -> None:
        self.pid, self.level, self.uid = pid, level, uid
        self.exited, self.status, self.killed = False, 0, False
        self.pidfd: int | None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def has_exited(self) -> bool:
        # WNOWAIT leaves the zombie in place: until it is reaped its pid (= its process group id) cannot
        # be reused, so kill_all() below can never hit an unrelated process.
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def reap(self) -> None:
        _, self.status = os.waitpid(self.pid, 0)
        self.exited = True

    def kill_all(self) -> None:
        """Kill the candidate and everything it started (call before reaping it)."""
        if self.killed:
            return
        self.killed = True
        os.kill(self.pid, signal.SIGKILL)  # a zombie ignores it; with a PID namespace this kills them all
        if self.level != "namespaces":
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self.level == "unprivileged":
                _kill_uid(self.uid)


def _collect(candidate: _Candidate, caps: dict[int, int], names: dict[int, str],
             deadline: float) -> tuple[dict[int, bytearray], bool, str | None]:
    """Read the candidate's pipes until they close, the deadline passes or one overflows its cap.

    Returns (what each pipe delivered, timed out, the name of the pipe that overflowed or None)."""
    bufs = {fd: bytearray() for fd in caps}
    open_fds = set(caps)
    timed_out, overflow = False, None
    drain_deadline = None
    while open_fds:
        now = time.monotonic()
        limit = drain_deadline if drain_deadline is not None else deadline
        if now >= limit:
            if drain_deadline is None:
                timed_out = True
                candidate.kill_all()
            break
        pidfd = candidate.pidfd
        watch = list(open_fds) + ([pidfd] if pidfd is not None and not candidate.exited else [])
        ready, _, _ = select.select(watch, [], [], min(limit - now, 0.05 if pidfd is None else limit - now))
        full = _read_ready(ready, pidfd, bufs, caps, open_fds)
        if full is not None:
            overflow = names[full]
            candidate.kill_all()
            break
        if not candidate.exited and candidate.has_exited():
            # The candidate is gone: take its leftovers down now (they may hold the pipes open), then
            # read what is still buffered.
            candidate.kill_all()
            candidate.reap()
            drain_deadline = min(deadline, time.monotonic() + 0.5)
    return bufs, timed_out, overflow


def _read_ready(ready: list[int], pidfd: int | None, bufs: dict[int, bytearray], caps: dict[int, int],
                open_fds: set[int]) -> int | None:
    """Read one chunk from each ready pipe; the first pipe to pass its cap (truncated to it), or None."""
    for fd in ready:
        if fd == pidfd:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            open_fds.discard(fd)
            continue
        bufs[fd] += chunk
        if len(bufs[fd]) > caps[fd]:
            del bufs[fd][caps[fd]:]
            open_fds.clear()
            return fd
    return None


def _utf8(data: bytes | bytearray, head_cut: bool = False, tail_cut: bool = False) -> str:
    """Text of a captured stream; where it was cut (a cap), a character split by the cut is dropped, not
    shown as a replacement character."""
    data = bytes(data)
    if head_cut:
        data = data[next((i for i, b in enumerate(data[:4]) if b & 0xC0 != 0x80), 0):]
    if tail_cut:
        for back in range(1, min(4, len(data)) + 1):
            lead = data[-back]
            if lead & 0xC0 == 0xC0:  # the last sequence's lead byte: keep the sequence only when whole
                need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
                if back < need:
                    data = data[:-back]
                break
            if lead & 0x80 == 0:
                break
    return data.decode("utf-8", errors="replace")


def _report(out: dict[str, bytearray], status: int, timed_out: bool, overflow: str | None,
            started: float, stderr_keep: int = _STDERR_KEEP) -> dict[str, Any]:
    """The execution report the zygote sends back (the wire format SandboxPool parses). stderr keeps its
    last ``stderr_keep`` bytes (a traceback's end); ``stderr_dropped`` counts the bytes before them."""
    err = out["stderr"]
    report: dict[str, Any] = {
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out, "overflow": overflow,
        "stdout": _utf8(out["stdout"], tail_cut=overflow == "stdout"),
        "stderr": _utf8(err[-stderr_keep:], head_cut=len(err) > stderr_keep, tail_cut=overflow == "stderr"),
        "stderr_dropped": max(0, len(err) - stderr_keep),
        "result": out["result"].decode("utf-8", errors="replace"),
        "wall_s": time.monotonic() - started,
        "error": None,
    }
    setup_error = out["setup"].decode("utf-8", errors="replace")
    if setup_error:
        report["error"] = f"sandbox setup failed: {setup_error}"
    if report["signal"] == signal.SIGXCPU:
        report["timed_out"] = True
    return report


def _zygote_main(cfg: dict[str, Any]) -> None:
    """Serve execution requests (one JSON line in, one JSON line out) until stdin closes.

    The zygote never runs candidate code: each request is served by a forked guard that forks the
    candidate, so every execution starts from this pristine, pre-imported state."""
    for name in cfg.get("preimport", ()):
        try:
            __import__(name)
        except ImportError:
            pass
    import resource  # noqa: F401 - imported before the snapshot: the child needs it

    _libc()

    # Python < 3.11 puts this script's directory (for rewards_sandbox.py: the run dir) first on sys.path;
    # it must neither be bound back into the sandbox's view nor be importable from there.
    own_dir = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != own_dir]
    cfg["view"] = _plan_view(_interpreter_paths(), hide=cfg.get("hide_paths", ()))
    _snapshot_pristine()
    base_dir = tempfile.mkdtemp(prefix="sandbox-", dir=cfg.get("tmp_root"))
    os.chmod(base_dir, 0o711)
    isolation = _probe(cfg["uid"])
    level = cfg.get("level") or isolation.level
    if not isolation.at_least(level):
        level = isolation.level
    cfg["level"] = level
    out = sys.stdout.buffer

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    send({"ready": True, "isolation": {**isolation.__dict__, "notes": list(isolation.notes)},
          "level": level, "base_dir": base_dir})
    seq = 0
    try:
        for line in sys.stdin.buffer:
            seq += 1
            req = json.loads(line)
            guard = os.fork()
            if guard == 0:
                # The guard answers the trusted side directly (one hop less); it exits 0 only after
                # the whole line is written, so the zygote knows when to answer in its place.
                try:
                    report = _execute(req, cfg, base_dir, seq)
                except BaseException as exc:  # noqa: BLE001 - the guard must always answer
                    report = {"error": f"sandbox guard failed: {_exception_line(exc)}"}
                code = 1
                try:
                    data = json.dumps(report).encode() + b"\n"
                    while data:
                        data = data[os.write(1, data):]
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(guard, 0)
            if status != 0:
                # A partial line may precede this one; the trusted side then restarts this zygote.
                send({"error": f"sandbox guard died (wait status {status})"})
    finally:
        if level == "unprivileged":
            _kill_uid(cfg["uid"])
        shutil.rmtree(base_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Trusted side: jobs, verdicts, pool
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StdioTest:
    """One stdin → expected stdout case."""

    stdin: str
    expected_stdout: str


@dataclass(frozen=True)
class StdioJob:
    """Run ``code`` as a program once per test; compare stdout on the trusted side."""

    code: str
    tests: Sequence[StdioTest | tuple[Any, ...]]
    compare: str = "lines"
    timeout_s: float | None = None
    memory_mb: int | None = None
    abs_tol: float = 1e-6
    rel_tol: float = 1e-6
    checker: str | None = None


@dataclass(frozen=True)
class CallTest:
    """Call the function with ``args`` (and ``kwargs``); ``expected`` is the return value."""

    args: Sequence[Any]
    expected: Any
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallJob:
    """Call ``function`` defined by ``code`` once per test; the trusted side compares return values."""

    code: str
    function: str
    tests: Sequence[CallTest | tuple[Any, ...]]
    compare: str = "python"
    timeout_s: float | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class AssertJob:
    """MBPP / HumanEval-style assert tests (see the module docstring for how they are judged)."""

    code: str
    tests: str | Sequence[str]
    setup: str = ""
    entry_point: str | None = None
    timeout_s: float | None = None
    memory_mb: int | None = None


Job = StdioJob | CallJob | AssertJob


@dataclass(frozen=True)
class ExecJob:
    """Run ``code`` as a Python program (``__main__``) with ``stdin`` and return what it printed (a tool's
    code interpreter, not a test): same isolation and limits as the test jobs. ``max_output_bytes`` caps
    each stream (default: the pool's); a program that writes past it is stopped there."""

    code: str
    stdin: str = ""
    timeout_s: float | None = None
    max_output_bytes: int | None = None


@dataclass(frozen=True)
class Execution:
    """What an :class:`ExecJob` did. ``status``: ``ok`` (exit 0), ``failed`` (non-zero exit: an exception,
    ``sys.exit(1)``, MemoryError), ``timeout``, ``output_limit`` (stopped at the cap), ``crashed`` (killed
    by a signal), ``error`` (the sandbox itself failed, not the program). ``stdout`` is exact (up to the
    cap); ``stderr`` keeps its last ``max_output_bytes``. ``detail``: one line."""

    status: str
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    detail: str
    wall_s: float
    signal: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_text(self) -> str:
        """The execution as a tool returns it to the model: exactly stdout when the program exited 0 with
        nothing on stderr; else stdout, then bracketed notes (truncation, stderr, exit status, timeout)."""
        if self.status == "error":
            return f"[sandbox error: {self.detail}]"
        notes = []
        if self.stdout_truncated:
            notes.append("[stdout truncated: the program was stopped at the output cap]")
        if self.stderr:
            head = "[stderr, last part]" if self.stderr_truncated else "[stderr]"
            notes.append(f"{head}\n{self.stderr.rstrip(chr(10))}")
        status_note = {"ok": "", "failed": f"[exit status {self.exit_code}]", "timeout": f"[{self.detail}]",
                       "output_limit": "" if self.stdout_truncated else f"[stopped: {self.detail}]",
                       "crashed": f"[{self.detail}]"}
        if status_note.get(self.status):
            notes.append(status_note[self.status])
        if not notes:
            return self.stdout
        return self.stdout + ("" if not self.stdout or self.stdout.endswith("\n") else "\n") + "\n".join(notes)


def _execution(report: dict[str, Any], cap: int, timeout_s: float) -> Execution:
    """The trusted reading of one exec report (candidate-controlled text stays text, never parsed)."""
    stderr = str(report.get("stderr") or "")
    overflow = report.get("overflow")
    exit_code, sig = report.get("exit_code"), report.get("signal")
    if report.get("error"):
        status, detail = "error", str(report["error"])
    elif report.get("timed_out"):
        status, detail = "timeout", f"timed out after {timeout_s:g} s"
    elif overflow:
        status, detail = "output_limit", f"{overflow} passed the {cap}-byte output cap"
    elif sig:
        status, detail = "crashed", f"killed by signal {sig}"
    elif exit_code != 0:
        tail = stderr.strip().splitlines()
        status, detail = "failed", (tail[-1][:300] if tail else f"exit status {exit_code}")
    else:
        status, detail = "ok", ""
    return Execution(status=status, stdout=str(report.get("stdout") or ""), stderr=stderr, exit_code=exit_code,
                     timed_out=status == "timeout", stdout_truncated=overflow == "stdout",
                     stderr_truncated=overflow == "stderr" or bool(report.get("stderr_dropped")),
                     detail=detail.replace("\n", " "), wall_s=float(report.get("wall_s") or 0.0), signal=sig)


@dataclass(frozen=True)
class Result:
    """The trusted verdict for one job."""

    passed: bool
    score: float
    status: str
    detail: str
    wall_s: float
    tests_passed: int
    tests_total: int
    test_statuses: tuple[str, ...] = ()


def _decode_value(node: Any, depth: int = 0) -> Any:
    """Plain data from the sandbox's tagged JSON (also used child-side for call arguments)."""
    if depth > 120:
        raise ValueError("value nested too deeply")
    if node is None or isinstance(node, (bool, int, str)):
        return node
    if isinstance(node, float):
        return node
    if isinstance(node, list):
        return [_decode_value(v, depth + 1) for v in node]
    if isinstance(node, dict) and len(node) == 1:
        (tag, val), = node.items()
        if tag == "f":
            return float(val)
        if tag == "t":
            return tuple(_decode_value(v, depth + 1) for v in val)
        if tag == "d":
            return {_decode_value(k, depth + 1): _decode_value(v, depth + 1) for k, v in val}
        if tag == "s":
            return {_decode_value(v, depth + 1) for v in val}
        if tag == "fs":
            return frozenset(_decode_value(v, depth + 1) for v in val)
        if tag == "b":
            return bytes.fromhex(val)
        if tag == "c":
            return complex(float(val[0]), float(val[1]))
    raise ValueError(f"not a sandbox value: {str(node)[:80]}")


_PLAIN_ENCODER = None


def _encode_plain(value: Any) -> Any:
    """Tagged JSON for trusted values (call arguments) — same format the child emits."""
    global _PLAIN_ENCODER
    if _PLAIN_ENCODER is None:
        _PLAIN_ENCODER = _make_encoder()
    return _PLAIN_ENCODER(value)


def _json_normal(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_normal(v) for v in value]
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _json_normal(v) for k, v in value.items()}
    return value


STDIO_COMPARES = ("exact", "lines", "tokens", "float", "unordered_lines")
_NUMBER_CHARS = 400  # a token longer than this is compared as text: float() of a huge digit run is not read


def _number(token: str) -> float | None:
    if len(token) > _NUMBER_CHARS:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _tokens_close(got: str, expected: str, abs_tol: float, rel_tol: float) -> bool:
    """Token-wise; two tokens that both read as numbers match within either tolerance (a judge's float check)."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        fx, fy = _number(x), _number(y)
        if fx is None or fy is None or not math.isclose(fx, fy, rel_tol=rel_tol, abs_tol=abs_tol):
            return False
    return True


def _stdout_matches(got: str, expected: str, mode: str, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> bool:
    if mode == "exact":
        return got == expected
    if mode == "tokens":
        return got.split() == expected.split()
    if mode == "float":
        return _tokens_close(got, expected, abs_tol, rel_tol)

    def lines(text: str) -> list[str]:
        out = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        return out

    if mode == "unordered_lines":
        return sorted(lines(got)) == sorted(lines(expected))
    return lines(got) == lines(expected)


# ---- Split asserts: the sandbox evaluates only the candidate-dependent parts, the trusted side the rest.

_SAFE_FUNCS = {f.__name__: f for f in (abs, len, sorted, set, frozenset, list, tuple, dict, round, min, max,
                                       sum, all, any, int, float, bool, str, isinstance)}
_SAFE_MATH = {name: getattr(math, name) for name in ("isclose", "fabs", "floor", "ceil", "sqrt", "pi", "e",
                                                     "inf", "nan", "isnan", "isinf")}
_SAFE_KEYWORDS = {"isclose": {"rel_tol", "abs_tol"}, "sorted": {"reverse"}, "round": {"ndigits"}}
_MAX_BUILT_LEN = 10 ** 7
_PLACEHOLDER = "_sandbox_value_"


class _NotSplittable(Exception):
    pass


@dataclass(frozen=True)
class _Check:
    """A split assert: ``src`` (a tuple of the candidate-dependent subexpressions) is evaluated in the
    sandbox; ``expr`` (the assert's test, those subexpressions replaced by placeholders) is evaluated
    on the trusted side by :func:`_trusted_eval` over the plain values that came back."""

    src: str
    expr: ast.AST

    def judge(self, values: Any) -> bool:
        if not isinstance(values, tuple):
            return False
        env = {f"{_PLACEHOLDER}{i}": v for i, v in enumerate(values)}
        return bool(_trusted_eval(self.expr, env))


def _safe_callable(func: ast.AST, shadowed: frozenset[str] = frozenset()) -> str | None:
    """The whitelisted name of a call target (``abs``, ``math.isclose``), else None (``shadowed``: names
    the task itself defines, e.g. an entry point called ``max``)."""
    if isinstance(func, ast.Name) and func.id in _SAFE_FUNCS and func.id not in shadowed:
        return func.id
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math"
            and func.attr in _SAFE_MATH):
        return func.attr
    return None


def _split_assert(stmt: ast.stmt, shadowed: frozenset[str] = frozenset()) -> _Check | None:
    """Split an assert into sandbox subexpressions (calls of anything not whitelisted — the candidate's
    functions — with their arguments) and a trusted remainder built only from literals, operators and
    whitelisted pure functions. None when the assert must run in-process (free names, lambdas,
    comprehensions, method calls on results ...)."""
    if not isinstance(stmt, ast.Assert):
        return None
    parts: list[str] = []

    def placeholder(node: ast.expr) -> ast.expr:
        if any(isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                              ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
            raise _NotSplittable
        parts.append(ast.unparse(node))
        return ast.Name(f"{_PLACEHOLDER}{len(parts) - 1}", ast.Load())

    def visit(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, ast.Call):
            name = _safe_callable(node.func, shadowed)
            if name is None:
                return placeholder(node)
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                    kw.arg not in _SAFE_KEYWORDS.get(name, ()) for kw in node.keywords):
                raise _NotSplittable
            return ast.Call(node.func, [visit(a) for a in node.args],
                            [ast.keyword(kw.arg, visit(kw.value)) for kw in node.keywords])
        if isinstance(node, ast.Name) and node.id in _SAFE_FUNCS and node.id not in shadowed:
            return node  # a type for isinstance()
        if isinstance(node, ast.Attribute) and _safe_callable(node) is not None:
            return node  # math.pi
        if isinstance(node, (ast.Attribute, ast.Subscript)) and any(
                isinstance(n, ast.Call) and _safe_callable(n.func, shadowed) is None for n in ast.walk(node)):
            # f(x).real, f(x)[0]: the whole expression is candidate-dependent; evaluate it in the sandbox.
            return placeholder(node)
        if isinstance(node, ast.Subscript):
            return ast.Subscript(visit(node.value), visit(node.slice), ast.Load())
        if isinstance(node, ast.Slice):
            return ast.Slice(*(visit(x) if x is not None else None for x in (node.lower, node.upper, node.step)))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return type(node)([visit(e) for e in node.elts], ast.Load()) if not isinstance(node, ast.Set) \
                else ast.Set([visit(e) for e in node.elts])
        if isinstance(node, ast.Dict) and None not in node.keys:
            return ast.Dict([visit(k) for k in node.keys if k is not None], [visit(v) for v in node.values])
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(node.op, visit(node.operand))
        if isinstance(node, ast.BinOp):
            return ast.BinOp(visit(node.left), node.op, visit(node.right))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [visit(v) for v in node.values])
        if isinstance(node, ast.Compare):
            return ast.Compare(visit(node.left), node.ops, [visit(c) for c in node.comparators])
        if isinstance(node, ast.IfExp):
            return ast.IfExp(visit(node.test), visit(node.body), visit(node.orelse))
        raise _NotSplittable

    try:
        expr = visit(stmt.test)
    except (_NotSplittable, RecursionError):
        return None
    if not parts:
        return None
    return _Check("(" + ", ".join(parts) + ",)", expr)


def _guarded_binop(op: ast.operator, left: Any, right: Any) -> Any:
    """Binary operators on candidate values, refusing results that would exhaust the trusted side."""
    if isinstance(op, ast.Mult):
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int):
                if len(seq) * max(times, 0) > _MAX_BUILT_LEN:
                    raise ValueError("result too large")
        return left * right
    if isinstance(op, (ast.Pow, ast.LShift)):
        if isinstance(left, int) and isinstance(right, int) and (
                abs(right) > 100_000 or left.bit_length() * abs(right) > 1_000_000):
            raise ValueError("result too large")
        return left ** right if isinstance(op, ast.Pow) else left << right
    ops: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
           ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Div: lambda a, b: a / b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.RShift: lambda a, b: a >> b,
           ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b}
    if type(op) not in ops or isinstance(op, ast.Mod) and isinstance(left, (str, bytes)):
        raise ValueError(f"operator {type(op).__name__} not evaluated on the trusted side")
    return ops[type(op)](left, right)


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
            ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
            ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
          ast.USub: lambda a: -a, ast.UAdd: lambda a: +a, ast.Not: lambda a: not a, ast.Invert: lambda a: ~a}


def _trusted_eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate a split assert's trusted remainder over plain values (only the node types and
    whitelisted functions :func:`_split_assert` lets through)."""

    def ev(n: Any) -> Any:  # an ast.expr (a Dict's keys are typed expr | None; split ones are never None)
        return _trusted_eval(n, env)

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return _SAFE_FUNCS[node.id]
    if isinstance(node, ast.Attribute):
        return _SAFE_MATH[node.attr]
    if isinstance(node, ast.Call):
        func: Any = (_SAFE_FUNCS.get(node.func.id) if isinstance(node.func, ast.Name)
                     else _SAFE_MATH[cast(ast.Attribute, node.func).attr])
        return func(*[ev(a) for a in node.args], **{cast(str, kw.arg): ev(kw.value) for kw in node.keywords})
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [ev(e) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Set):
        return {ev(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Subscript):
        return ev(node.value)[ev(node.slice)]
    if isinstance(node, ast.Slice):
        return slice(*(ev(x) if x is not None else None for x in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](ev(node.operand))
    if isinstance(node, ast.BinOp):
        return _guarded_binop(node.op, ev(node.left), ev(node.right))
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        value = None
        for operand in node.values:
            value = ev(operand)
            if bool(value) != is_and:
                return value
        return value
    if isinstance(node, ast.Compare):
        left = ev(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = ev(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return ev(node.body) if ev(node.test) else ev(node.orelse)
    raise ValueError(f"{type(node).__name__} is not evaluated on the trusted side")


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node


def _assert_plan(job: AssertJob) -> tuple[list[dict[str, Any]], list[_Check | None]]:
    """Steps for the child and, per test step, the trusted check (None = in-process assert)."""
    steps: list[dict[str, Any]] = []
    checks: list[_Check | None] = []

    shadowed = frozenset({job.entry_point} if job.entry_point else ())

    def add_test(stmt: ast.stmt, src: str | None = None) -> None:
        check = _split_assert(stmt, shadowed)
        if check is not None:
            steps.append({"k": "eval", "src": check.src})
        else:
            steps.append({"k": "assert", "src": src if src is not None else ast.unparse(stmt)})
        checks.append(check)

    if job.setup.strip():
        steps.append({"k": "exec", "src": job.setup})
        checks.append(None)
    if isinstance(job.tests, str):
        try:
            module = ast.parse(job.tests)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            steps.append({"k": "exec", "src": job.tests})
            checks.append(None)
            steps.append({"k": "assert", "src": f"check({job.entry_point})" if job.entry_point else "pass"})
            checks.append(None)
            return steps, checks
        check_fn = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
        inline = (job.entry_point and check_fn is not None and len(check_fn.args.args) == 1
                  and all(isinstance(s, (ast.Assert, ast.Import, ast.ImportFrom, ast.Expr))
                          for s in check_fn.body))
        for stmt in module.body:
            if isinstance(stmt, ast.Assert):
                add_test(stmt)
            elif stmt is check_fn and inline:
                param = check_fn.args.args[0].arg
                for inner in check_fn.body:
                    if isinstance(inner, ast.Assert):
                        add_test(_Rename(param, cast(str, job.entry_point)).visit(inner))
                    elif not isinstance(inner, ast.Expr):  # imports; docstrings are dropped
                        steps.append({"k": "exec", "src": ast.unparse(inner)})
                        checks.append(None)
            else:
                steps.append({"k": "exec", "src": ast.unparse(stmt)})
                checks.append(None)
        if job.entry_point and check_fn is not None and not inline:
            steps.append({"k": "assert", "src": f"check({job.entry_point})"})
            checks.append(None)
    else:
        for test_src in job.tests:
            try:
                body = ast.parse(test_src).body
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                body = []  # runs in-process and fails there, like the dataset says
            if len(body) == 1:
                add_test(body[0], test_src)
            else:
                steps.append({"k": "assert", "src": test_src})
                checks.append(None)
    return steps, checks


def _records(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _failure_status(report: dict[str, Any]) -> str | None:
    if report.get("error"):
        return "error"
    if report.get("timed_out"):
        return "timeout"
    if report.get("overflow"):
        return "output_limit"
    return None


def _failure_detail(report: dict[str, Any], status: str) -> str:
    if status == "error":
        return str(report.get("error"))
    if status == "timeout":
        return f"time limit exceeded ({report.get('wall_s', 0):.2f}s wall)"
    if status == "output_limit":
        return f"{report.get('overflow')} exceeded the output cap"
    tail = (report.get("stderr") or "").strip().splitlines()
    if report.get("signal"):
        return f"killed by signal {report['signal']}" + (f": {tail[-1]}" if tail else "")
    return tail[-1][:300] if tail else f"exit code {report.get('exit_code')}"


def _judge_stdio(report: dict[str, Any], test: StdioTest, job: StdioJob) -> tuple[str, str]:
    status = _failure_status(report)
    if status:
        return status, _failure_detail(report, status)
    if report.get("exit_code") != 0 or report.get("signal"):
        return "crashed", _failure_detail(report, "crashed")
    if job.checker is not None:
        return _checker_verdict(report.get("checker"))
    if _stdout_matches(report.get("stdout", ""), test.expected_stdout, job.compare, job.abs_tol, job.rel_tol):
        return "passed", ""
    return "failed", f"wrong output: got {report.get('stdout', '')[:80]!r}"


def _checker_verdict(report: dict[str, Any] | None) -> tuple[str, str]:
    """A special judge's exit code as a verdict (testlib: 0 ok, 1 wrong answer, 2 presentation error)."""
    if report is None:
        return "error", "the checker did not run"
    status = _failure_status(report) or ("crashed" if report.get("signal") else None)
    code = report.get("exit_code")
    if status is None and code == 0:
        return "passed", ""
    if status is None and code in (1, 2):
        tail = (report.get("stderr") or report.get("stdout") or "").strip().splitlines()
        return "failed", ("wrong answer" if code == 1 else "presentation error") + (
            f" (checker: {tail[-1][:200]})" if tail else " (checker)")
    return "error", f"the checker failed: {_failure_detail(report, status or 'crashed')}"


def _judge_steps(report: dict[str, Any], token: str, test_indices: list[int],
                 judge: Callable[[int, dict[str, Any]], tuple[bool, str]]) -> tuple[list[str], str]:
    """Per-test statuses from the child's records. ``judge(index, record) -> (ok, why)``."""
    records = _records(report.get("result", ""))
    by_index: dict[int, dict[str, Any]] = {}
    load: dict[str, Any] | None = None
    done = False
    for rec in records:
        if "load" in rec and load is None:
            load = rec
        elif rec.get("done") == token:
            done = True
        elif isinstance(rec.get("i"), int) and rec["i"] not in by_index:
            by_index[rec["i"]] = rec
    failure = _failure_status(report)
    statuses, details = [], []
    for index in test_indices:
        got = by_index.get(index)
        if got is None:
            if load is not None and not load.get("load"):  # the module raised (SystemExit included)
                statuses.append(failure or ("exited_early" if load.get("exit") else "crashed"))
            else:
                died = "crashed" if report.get("signal") else "exited_early"
                statuses.append(failure or (died if not done else "failed"))
            continue
        ok, why = judge(index, got)
        statuses.append("passed" if ok else "failed")
        if why:
            details.append(why)
    if failure:
        return statuses, _failure_detail(report, failure)
    if load is not None and not load.get("load"):
        return statuses, f"solution failed to load: {load.get('e', '')}"
    if load is None:
        return statuses, "exited before the tests ran" + (
            f" (exit code {report.get('exit_code')})" if report.get("exit_code") is not None
            else f" (signal {report.get('signal')})")
    if not done and any(s != "passed" for s in statuses):
        details.insert(0, "exited before the tests finished")
    return statuses, (details[0] if details else "")


def _short(value: Any, limit: int = 80) -> str:
    import reprlib

    short = reprlib.Repr()
    short.maxstring = short.maxother = limit
    return short.repr(value)[:limit]


_ValueCheck = Callable[[Any], bool] | _Check | None


def _value_judge(checks: dict[int, _ValueCheck], token: str) -> Callable[[int, dict[str, Any]], tuple[bool, str]]:
    def judge(index: int, rec: dict[str, Any]) -> tuple[bool, str]:
        check = checks[index]
        if not rec.get("ok"):
            return False, str(rec.get("e", "error"))[:200]
        if check is None:  # in-process assert: only the secret token proves it completed
            return (rec.get("tk") == token), ("" if rec.get("tk") == token else "forged test record")
        try:  # the record is candidate-controlled: any malformation is a failed test, never a crash
            value = _decode_value(rec.get("v"))
        except Exception:  # noqa: BLE001
            return False, "unreadable return value"
        try:
            ok = bool(check(value) if callable(check) else check.judge(value))
        except Exception as exc:  # noqa: BLE001 - e.g. sorted() of mixed types: the test fails
            return False, f"check raised {_exception_line(exc)} on {_short(value)}"
        if isinstance(check, _Check) and isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        return ok, "" if ok else f"got {_short(value)}"
    return judge


class _Zygote:
    """One pool slot's pristine server process and its unprivileged uid."""

    def __init__(self, pool: SandboxPool, slot: int):
        self.pool, self.slot = pool, slot
        self.uid = pool._uid_base + slot
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] | None = None

    def start(self) -> None:
        cfg = {"uid": self.uid, "level": self.pool._level_wanted, "hide_paths": self.pool._hide_paths,
               "tmp_root": self.pool._tmp_root, "preimport": list(self.pool._preimport)}
        # stderr goes to a file, not a pipe: nobody drains it during a run, a file never blocks.
        self.stderr: IO[bytes] = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            # not -I: it would ignore PYTHONHASHSEED; the environment is built whole instead (what -E gives)
            # and sets what -I's other flags would, with one fixed string-hash seed for every execution
            _child_argv(self.pool._python, ("-s",), "--zygote"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=_zygote_hashseed_env(), start_new_session=True, close_fds=True, cwd="/")
        self.buf = b""
        # The code, then the configuration as the first line on stdin, not argv: a candidate can read its
        # argv (/proc/1/cmdline is the zygote's) and `ps` stays readable.
        stdin, _ = self._pipes()
        try:
            stdin.write(_own_code_blob() + json.dumps(cfg).encode() + b"\n")
            stdin.flush()
        except OSError:  # died at start-up: read_hello reports it with its stderr
            pass

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        """The started zygote's stdin and stdout (start() opens both as pipes)."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def read_hello(self, timeout: float) -> dict[str, Any]:
        line = self._read_line(time.monotonic() + timeout)
        if line is None:
            self.stderr.seek(0)
            tail = self.stderr.read()[-600:].decode(errors="replace").strip().replace("\n", " | ")
            self.kill()
            raise SandboxError(f"the sandbox zygote ({self.pool._python}) did not start: {tail or 'no output'}")
        hello: dict[str, Any] = json.loads(line)
        self.hello = hello
        return hello

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self._pipes()[1].fileno()
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def execute(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.proc is not None and self.proc.poll() is not None:
            self.kill()  # it died (OOM killer, a stray signal): clean up after it, then start afresh
        if self.proc is None:
            self.start()
            self.read_hello(60)
        stdin, _ = self._pipes()
        try:
            stdin.write(json.dumps(req).encode() + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            return {"error": f"sandbox zygote gone: {exc}"}
        # The guard enforces the timeout; this backstop only fires if the guard itself hangs.
        line = self._read_line(time.monotonic() + req["timeout_s"] + 30.0)
        if line is None:
            self.kill()
            return {"error": "sandbox guard did not answer; zygote restarted"}
        try:
            reply: dict[str, Any] = json.loads(line)
            return reply
        except ValueError:
            self.kill()
            return {"error": "sandbox guard answered garbage; zygote restarted"}

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.pool.isolation_level != "process":
            # A namespace's init outlives its killed guard: take down everything under the slot's uid.
            _sweep_uid_subprocess(self.pool._python, self.uid)
        self._release()

    def _release(self) -> None:
        """Close this zygote's pipes and remove its temp dir (a killed zygote cannot)."""
        for stream in (*self._pipes(), self.stderr):
            try:
                stream.close()
            except OSError:
                pass
        base_dir = (self.hello or {}).get("base_dir")
        if base_dir and os.path.basename(base_dir).startswith("sandbox-"):
            shutil.rmtree(base_dir, ignore_errors=True)
        self.proc, self.hello = None, None

    def close(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self._pipes()[0].close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self._release()


def _sweep_uid_subprocess(python: str, uid: int) -> None:
    if os.geteuid() != 0:
        return
    subprocess.run(_child_argv(python, ("-I", "-S"), "--kill-uid", str(uid)), input=_own_code_blob(),
                   env=_zygote_env(), timeout=30, check=False, cwd="/")


def _zygote_env() -> dict[str, Any]:
    return {"PATH": _SAFE_PATH, "LANG": "C.UTF-8"}


def _zygote_hashseed_env() -> dict[str, Any]:
    """The zygote's environment: every execution is a fork of it and inherits one fixed string-hash seed,
    so ``list(set(words))`` orders alike in every run and worker. Not ``-I`` (it would ignore
    PYTHONHASHSEED): the environment is built here whole, and the variables set what ``-I`` would."""
    return {**_zygote_env(), "PYTHONHASHSEED": "0", "PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}


def _default_hide_paths() -> list[str]:
    """Paths the sandbox's view must not show even where they lie inside something it binds (the interpreter's
    folders, a system directory): the trusted side's working dir, this module's folder (for rewards_sandbox.py:
    the run dir), the running script's folder, HOME. Everything outside _VIEW_SYSTEM and the interpreter's own
    paths is absent anyway. Pass ``hide_paths`` to add a dataset directory under a system directory."""
    paths = [os.getcwd(), os.path.dirname(os.path.abspath(__file__)), os.path.expanduser("~"), "/root", "/home"]
    script = sys.argv[0] if sys.argv else ""
    if script and os.path.isfile(script):
        paths.append(os.path.dirname(os.path.abspath(script)))
    return paths


_SENTINEL = object()
_LIVE_POOLS: weakref.WeakSet[SandboxPool] = weakref.WeakSet()


WORKERS_ENV = "FINETUNE_SANDBOX_WORKERS"


def default_workers() -> int:
    """Workers of a pool built with ``workers=None``: ``FINETUNE_SANDBOX_WORKERS`` when set (the rendered train.py
    sets it from the host's cores and the training processes sharing them: a value outside the gated bytes, so
    sizing never changes rewards_sandbox.py), else one per CPU up to the uid block a pool may use (a 224-CPU
    host gets 128, not a refusal)."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if not value:
        return max(1, min(os.cpu_count() or 1, _UID_BLOCK))
    if not value.isdigit() or not 1 <= int(value) <= _UID_BLOCK:
        raise ValueError(f"{WORKERS_ENV}={value!r} is not a whole number from 1 to {_UID_BLOCK}; unset it or "
                         "give the workers per training process")
    return int(value)


@atexit.register
def _close_live_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


class SandboxPool:
    """Up to ``workers`` concurrent isolated executions (default: ``default_workers()``); see the module docstring.

    ``timeout_s`` is the wall-clock limit of one execution (one stdin test, or all calls / asserts of
    one job); ``memory_mb`` its address-space limit. Results come back in input order; a runaway is
    killed at its timeout and never stalls the others. ``close()`` (or leaving the ``with`` block)
    stops every process and removes every temp dir."""

    def __init__(self, workers: int | None = None, timeout_s: float = 5.0, memory_mb: int = 512,
                 min_isolation: str = "namespaces", *, isolation: str | None = None,
                 max_output_bytes: int = 1 << 20, disk_mb: int = 32, max_processes: int = 32,
                 max_open_files: int = 64, hide_paths: Sequence[str] | None = None,
                 tmp_root: str | None = None, python: str | None = None,
                 preimport: Sequence[str] = DEFAULT_PREIMPORT, queue_size: int | None = None):
        for name, level in (("min_isolation", min_isolation), ("isolation", isolation)):
            if level is not None and level not in ISOLATION_LEVELS:
                raise ValueError(f"{name} must be one of {ISOLATION_LEVELS}, not {level!r}")
        if isolation is not None and ISOLATION_LEVELS.index(isolation) < ISOLATION_LEVELS.index(min_isolation):
            raise ValueError(f"isolation={isolation!r} is below min_isolation={min_isolation!r}")
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailable(f"the sandbox needs Linux (fork, memfd, pidfd, namespaces), not {sys.platform}; "
                                     "run the unit-test reward on a Linux training box")
        if timeout_s <= 0 or memory_mb <= 0:
            raise ValueError("timeout_s and memory_mb must be positive")
        self.workers = workers or default_workers()
        if self.workers > _UID_BLOCK:
            raise ValueError(f"at most {_UID_BLOCK} workers")
        self.timeout_s, self.memory_mb, self.min_isolation = timeout_s, memory_mb, min_isolation
        self._limits = {"memory_mb": memory_mb, "max_output_bytes": max_output_bytes, "disk_mb": disk_mb,
                        "max_processes": max_processes, "max_open_files": max_open_files}
        self._level_wanted = isolation
        self._hide_paths = _default_hide_paths() + [os.path.abspath(p) for p in hide_paths or ()]
        self._tmp_root, self._python = tmp_root, python or sys.executable
        self._preimport = tuple(preimport)
        self._pool_index = _claim_pool_index()
        self._uid_base = _uid_block(self._pool_index)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size or 2 * self.workers)
        self._closed = False
        self._lock = threading.Lock()
        self._zygotes = [_Zygote(self, slot) for slot in range(self.workers)]
        self.isolation_level = "process"
        try:
            for z in self._zygotes:
                z.start()
            hellos = [z.read_hello(60) for z in self._zygotes]
        except BaseException:
            self._stop_zygotes()
            raise
        iso = dict(hellos[0]["isolation"])
        iso["notes"] = tuple(iso["notes"])
        self.isolation = Isolation(**iso)
        self.isolation_level = hellos[0]["level"]
        if ISOLATION_LEVELS.index(self.isolation_level) < ISOLATION_LEVELS.index(min_isolation):
            self._stop_zygotes()
            raise SandboxUnavailable(
                f"this host grants sandbox isolation '{self.isolation.level}', below the required "
                f"'{min_isolation}' ({'; '.join(self.isolation.notes) or 'no detail'}); refusing to run "
                f"untrusted code. Fix: run as root where unshare() is permitted (docker: --cap-add "
                f"SYS_ADMIN, or --privileged), or lower min_isolation (the unit_tests reward's "
                f"min_isolation) if you accept the weaker isolation.")
        if isolation is not None and self.isolation_level != isolation:
            self._stop_zygotes()
            raise SandboxUnavailable(f"isolation={isolation!r} was asked for, but this host grants only "
                                     f"'{self.isolation.level}' ({'; '.join(self.isolation.notes)})")
        logging.getLogger(__name__).info("%s; %d workers, running at level %s", self.isolation.describe(),
                                         self.workers, self.isolation_level)
        _LIVE_POOLS.add(self)
        self._threads = [threading.Thread(target=self._worker, args=(z,), daemon=True,
                                          name=f"sandbox-{z.slot}") for z in self._zygotes]
        for t in self._threads:
            t.start()

    @property
    def candidate_uids(self) -> range:
        """The uids candidates run as (one per slot) at the ``unprivileged`` and ``namespaces`` levels."""
        return range(self._uid_base, self._uid_base + self.workers)

    @property
    def zygote_pids(self) -> list[int]:
        """Process ids of the live zygotes (for leak checks)."""
        return [z.proc.pid for z in self._zygotes if z.proc is not None]

    # -- context manager ----------------------------------------------------------------------------
    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


    # -- execution ----------------------------------------------------------------------------------
    def _worker(self, zygote: _Zygote) -> None:
        while True:
            item = self._queue.get()
            if item is _SENTINEL:
                return
            req, box, index, done = item
            try:
                box[index] = zygote.execute(req)
            except BaseException as exc:  # noqa: BLE001 - one bad execution never kills the worker
                box[index] = {"error": f"sandbox worker failed: {_exception_line(exc)}"}
            finally:
                done.release()

    def _base_request(self, timeout_s: float | None, memory_mb: int | None = None) -> dict[str, Any]:
        req = {**self._limits, "timeout_s": float(timeout_s or self.timeout_s)}
        if memory_mb:
            req["memory_mb"] = int(memory_mb)
        return req

    def run(self, job: Job) -> Result:
        """Run one job; see :meth:`run_batch`."""
        return self.run_batch([job])[0]

    def execute(self, job: ExecJob) -> Execution:
        """Run one program and return its output; see :meth:`execute_batch`."""
        return self.execute_batch([job])[0]

    def run_code(self, code: str, stdin: str = "", timeout_s: float | None = None,
                 max_output_bytes: int | None = None) -> Execution:
        """:meth:`execute` of an ``ExecJob`` built here: the tool API calls this, so a pool started by another
        copy of this module (another run's rewards_sandbox) gets a job of its own class."""
        return self.execute(ExecJob(code, stdin, timeout_s, max_output_bytes))

    def execute_batch(self, jobs: Sequence[ExecJob]) -> list[Execution]:
        """Run every program (in parallel, up to ``workers`` at once); executions in input order. What the
        program does (an exception, a timeout, a flood of output) is its Execution, never an exception here."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        requests = []
        for job in jobs:
            if not isinstance(job, ExecJob):
                raise TypeError(f"not an ExecJob: {type(job).__name__}")
            cap = int(job.max_output_bytes or self._limits["max_output_bytes"])
            if cap <= 0:
                raise ValueError("max_output_bytes must be positive")
            requests.append({**self._base_request(job.timeout_s), "mode": "script", "code": str(job.code),
                             "stdin": str(job.stdin or ""), "max_output_bytes": cap, "stderr_keep": cap,
                             "filename": "<snippet>"})
        reports = self._dispatch(requests)
        return [_execution(rep, req["max_output_bytes"], req["timeout_s"]) for rep, req in zip(reports, requests)]

    def _dispatch(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every request through the workers' queue; the reports in input order (an error report for any
        request the pool could not serve, never an exception)."""
        reports: list[dict[str, Any] | None] = [None] * len(requests)
        done = threading.Semaphore(0)
        for index, req in enumerate(requests):
            while True:  # bounded queue: wait for room, but never past a close()
                if self._is_closed():
                    reports[index] = {"error": "the sandbox pool was closed"}
                    done.release()
                    break
                try:
                    self._queue.put((req, reports, index, done), timeout=0.1)
                    break
                except queue.Full:
                    continue
        for _ in requests:
            done.acquire()
        return [r if r is not None else {"error": "no report"} for r in reports]

    def run_batch(self, jobs: Sequence[Job]) -> list[Result]:
        """Run every job (in parallel, up to ``workers`` at once); results in input order."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        plans = [self._plan(job) for job in jobs]
        reports = self._dispatch([req for plan in plans for req in plan[0]])
        self._run_checkers(jobs, [len(plan[0]) for plan in plans], reports)
        results: list[Result] = []
        offset = 0
        for reqs, finish in plans:
            chunk = reports[offset:offset + len(reqs)]
            try:
                results.append(finish(chunk))
            except Exception as exc:  # noqa: BLE001 - one job's verdict never breaks the batch
                results.append(_result(["error"] * max(1, len(reqs)), f"verdict failed: {_exception_line(exc)}",
                                       sum(r.get("wall_s", 0.0) for r in chunk)))
            offset += len(reqs)
        return results

    def _run_checkers(self, jobs: Sequence[Job], sizes: list[int], reports: list[dict[str, Any]]) -> None:
        """Each stdin job's special judge on each of its runs that exited 0, in the sandbox: its report is put
        in the run's report under ``checker``."""
        requests, targets, offset = [], [], 0
        for job, size in zip(jobs, sizes):
            if isinstance(job, StdioJob) and job.checker is not None:
                tests = [t if isinstance(t, StdioTest) else StdioTest(*t) for t in job.tests]
                for report, test in zip(reports[offset:offset + size], tests):
                    if _failure_status(report) or report.get("exit_code") != 0 or report.get("signal"):
                        continue
                    verdict_input = json.dumps({"input": test.stdin, "expected": test.expected_stdout,
                                                "output": report.get("stdout", "")})
                    requests.append({**self._base_request(job.timeout_s), "mode": "script", "code": job.checker,
                                     "stdin": verdict_input, "filename": "<checker>"})
                    targets.append(report)
            offset += size
        for report, checked in zip(targets, self._dispatch(requests) if requests else []):
            report["checker"] = checked

    def _plan(self, job: Job) -> tuple[list[dict[str, Any]], Callable[[list[dict[str, Any]]], Result]]:
        """The requests for one job and a function turning their reports into its Result."""
        if isinstance(job, StdioJob):
            tests = [t if isinstance(t, StdioTest) else StdioTest(*t) for t in job.tests]
            if job.compare not in STDIO_COMPARES:
                raise ValueError(f"StdioJob.compare must be one of {', '.join(STDIO_COMPARES)}, not {job.compare!r}")
            reqs = [{**self._base_request(job.timeout_s, job.memory_mb), "mode": "script", "code": job.code,
                     "stdin": t.stdin} for t in tests]

            def finish(reports: list[dict[str, Any]]) -> Result:
                verdicts = [_judge_stdio(r, t, job) for r, t in zip(reports, tests)]
                statuses = [s for s, _ in verdicts]
                detail = next((d for s, d in verdicts if s != "passed"), "")
                return _result(statuses, detail, sum(r.get("wall_s", 0.0) for r in reports))
            return reqs, finish

        token = secrets.token_hex(16)
        if isinstance(job, CallJob):
            if job.compare not in ("python", "json"):
                raise ValueError(f"CallJob.compare must be python or json, not {job.compare!r}")
            call_tests = [t if isinstance(t, CallTest) else CallTest(*t) for t in job.tests]
            steps = [{"k": "call", "fn": job.function, "args": _encode_plain(list(t.args)),
                      "kwargs": _encode_plain(dict(t.kwargs))} for t in call_tests]
            norm = _json_normal if job.compare == "json" else (lambda v: v)

            def equals(expected: Any) -> Callable[[Any], bool]:
                return lambda value: bool(norm(value) == norm(expected))

            checks: dict[int, _ValueCheck] = {i: equals(t.expected) for i, t in enumerate(call_tests)}
            test_indices = list(range(len(call_tests)))
        elif isinstance(job, AssertJob):
            steps, plan_checks = _assert_plan(job)
            test_indices = [i for i, s in enumerate(steps) if s["k"] != "exec"]
            checks = {i: plan_checks[i] for i in test_indices}
        else:
            raise TypeError(f"not a sandbox job: {type(job).__name__}")
        req = {**self._base_request(job.timeout_s, job.memory_mb), "mode": "steps", "code": job.code, "steps": steps,
               "token": token}

        def finish_steps(reports: list[dict[str, Any]]) -> Result:
            report = reports[0]
            statuses, detail = _judge_steps(report, token, test_indices, _value_judge(checks, token))
            return _result(statuses, detail, report.get("wall_s", 0.0), report)
        return [req], finish_steps

    # -- shutdown -----------------------------------------------------------------------------------
    def _stop_zygotes(self) -> None:
        for z in self._zygotes:
            z.close(timeout=10)
        with _pool_indices_lock:
            _pool_indices.discard(self._pool_index)

    def _is_closed(self) -> bool:
        """Read afresh each time: close() may run on another thread while run_batch waits for room."""
        return self._closed

    def close(self) -> None:
        """Stop every worker and zygote; remove every temp dir. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in getattr(self, "_threads", ()):
            self._queue.put(_SENTINEL)
        for t in getattr(self, "_threads", ()):
            t.join()
        while True:  # requests queued behind the sentinels: answer them so no caller waits forever
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _SENTINEL:
                _, box, index, done = item
                box[index] = {"error": "the sandbox pool was closed"}
                done.release()
        self._stop_zygotes()


def _result(statuses: list[str], detail: str, wall_s: float, report: dict[str, Any] | None = None) -> Result:
    total = len(statuses)
    passed_n = sum(s == "passed" for s in statuses)
    if total == 0:
        status = _failure_status(report or {}) or "failed"
        return Result(False, 0.0, status, detail or "no tests", wall_s, 0, 0, ())
    if passed_n == total:
        status = "passed"
    else:
        order = ("error", "timeout", "output_limit", "crashed", "exited_early", "failed")
        status = min((s for s in statuses if s != "passed"), key=order.index)
    return Result(passed_n == total, passed_n / total, status, detail.replace("\n", " "), wall_s,
                  passed_n, total, tuple(statuses))


# --------------------------------------------------------------------------------------------------
# Tools: the code-running tool of a user's environment (env.py: ``from rewards_sandbox import run_python``)
# --------------------------------------------------------------------------------------------------

TOOL_DEFAULTS: dict[str, Any] = {"memory_mb": 512, "min_isolation": "namespaces", "workers": 2,
                                 "timeout_s": 5.0, "max_output_bytes": 4096}
# One pool per process (a forked child starts its own: the parent's worker threads are not in it), and the
# one-line reason when the host cannot give one (asked once, not at every call). Kept on `sys`, like the pool
# slots: every copy of this module in a process (finetune.sandbox.runner, each run's rewards_sandbox, re-loaded
# per run directory) shares the one pool, so loading rewards again and again never opens pool after pool.
_TOOL_STATE: dict[str, Any] = sys.__dict__.setdefault("_llm_finetuning_tool_sandbox", {
    "pid": None, "pool": None, "settings": None, "unavailable": None, "lock": threading.Lock()})


def tool_pool(*, memory_mb: int | None = None, min_isolation: str | None = None,
              workers: int | None = None) -> SandboxPool:
    """The sandbox pool every code-running tool of this process shares, started on first use (defaults:
    ``TOOL_DEFAULTS``) and closed at exit. Call it in the environment's ``__init__`` to choose other
    settings, and to fail when the trainer builds its first environment rather than at the first call.
    Raises ``SandboxUnavailable`` (one line) when the host grants less than ``min_isolation``, and
    ``ValueError`` when settings differ from those of the pool already running."""
    asked = {"memory_mb": memory_mb, "min_isolation": min_isolation, "workers": workers}
    if _IN_AGENT_HOST:  # agent-written code in its sandbox: the trusted side's pool runs the code
        _host_callback("tool_pool", asked)
        return cast(SandboxPool, _ForwardedPool())
    state = _TOOL_STATE
    with state["lock"]:
        if state["pid"] != os.getpid() or (state["pool"] is not None and state["pool"]._is_closed()):
            state.update(pid=os.getpid(), pool=None, settings=None, unavailable=None)
        settings = state["settings"] or {k: TOOL_DEFAULTS[k] for k in asked}
        wanted = {k: (settings[k] if v is None else v) for k, v in asked.items()}
        if state["settings"] is not None and wanted != state["settings"]:
            raise ValueError(f"the tool sandbox already runs with {state['settings']}, not {wanted}: choose the "
                             "settings once (tool_pool(...) in the environment's __init__)")
        if state["unavailable"] is not None:
            raise SandboxUnavailable(state["unavailable"])
        if state["pool"] is None:
            try:
                pool = SandboxPool(workers=min(int(wanted["workers"]), os.cpu_count() or 1),
                                   timeout_s=TOOL_DEFAULTS["timeout_s"], memory_mb=int(wanted["memory_mb"]),
                                   min_isolation=str(wanted["min_isolation"]),
                                   max_output_bytes=TOOL_DEFAULTS["max_output_bytes"])
            except SandboxError as exc:
                state.update(settings=wanted, unavailable=" ".join(str(exc).split()))
                raise SandboxUnavailable(state["unavailable"]) from None
            state.update(pool=pool, settings=wanted)
        return cast(SandboxPool, state["pool"])  # a SandboxPool of this module or of another copy of it


def execute_python(code: str, stdin: str = "", *, timeout_s: float | None = None,
                   max_output_bytes: int | None = None) -> Execution:
    """Run a Python snippet as a program in the shared tool sandbox (:func:`tool_pool`) and return its
    :class:`Execution`. Raises ``SandboxUnavailable`` / ``SandboxError`` when the sandbox cannot run it."""
    return tool_pool().run_code(code, stdin or "", timeout_s or TOOL_DEFAULTS["timeout_s"],
                                max_output_bytes or TOOL_DEFAULTS["max_output_bytes"])


def run_python(code: str, stdin: str = "", *, timeout_s: float | None = None,
               max_output_bytes: int | None = None) -> str:
    """Run a Python snippet in the sandbox; the text a code-running tool returns to the model. Never
    raises: a clean run is its stdout, exactly; anything else is stdout followed by bracketed notes
    (``[stderr]`` and the traceback's end, ``[exit status N]``, ``[timed out after S s]``, ``[stdout
    truncated ...]``); a sandbox that cannot run it is one line, ``[sandbox unavailable: ...]`` or
    ``[sandbox error: ...]``. Limits: ``timeout_s`` wall seconds (default 5), ``max_output_bytes`` per
    stream (default 4096: the program is stopped there), the pool's memory and isolation."""
    # The model writes the arguments: a number or a list where a string belongs is its mistake, told back.
    given: tuple[object, ...] = (code, stdin or "")
    if not all(isinstance(value, str) for value in given):
        return "[error: code and stdin must be strings]"
    try:
        return execute_python(code, stdin, timeout_s=timeout_s, max_output_bytes=max_output_bytes).as_text()
    except SandboxUnavailable as exc:
        return f"[sandbox unavailable: {exc}]"
    except Exception as exc:  # noqa: BLE001 - a tool's failure is its result, never the rollout's crash
        return f"[sandbox error: {_exception_line(exc)}]"


# --------------------------------------------------------------------------------------------------
# Agent-written code: a `type: python` verifier, an environment, their own modules — run in the sandbox
# --------------------------------------------------------------------------------------------------
#
# The files an agent may write (copied beside rewards.py as rewards_user_NAME.py, rewards_env.py and
# rewards_lib_NAME.py) never run in the trusted process: an AgentHost is a sandboxed interpreter holding them,
# started as a fresh process whose first part (trusted: this module's code) builds the sandbox — new PID,
# network, IPC, UTS and mount namespaces (root: a candidate uid of its own; otherwise a user namespace of its
# own, every capability dropped after), the allow-listed read-only view (the run folder readable, nothing else
# of the project, HOME, /run, /var, /etc but the few entries Python reads), the system-call filter, no
# environment variable but the ones the person allowed — and only then imports the agent's modules. Each batch
# of a verifier's calls and each environment episode is a fresh fork of that host ("session"), so nothing
# carries over between them; what comes back is plain data (a score, a tool's result). The same host serves
# `inspect score`, the gate, `data filter`, `config render`, the sampler and training, so the code sees the same
# process, stack and environment in Phase 1 and in GRPO steps. A host that cannot be built refuses
# (AgentCodeRefused, one line with the reason): agent code never runs unsandboxed.

AGENT_CALL_TIMEOUT_S = 60.0  # one call of an environment's method (a tool, reset, get_reward)
AGENT_IMPORT_TIMEOUT_S = 60.0  # the agent's modules imported (in the host's first session)
AGENT_START_TIMEOUT_S = 120.0  # the sandbox built and the agent's modules imported
AGENT_MEMORY_MB = 4096  # address space of the host and each session
AGENT_DISK_MB = 64  # its /tmp scratch (and the largest file it may write there)
_AGENT_MAX_HOSTS = 4  # live hosts per process; the least recently used beyond it is closed
_AGENT_LIB = "rewards_lib_"  # an agent module NAME.py, copied as rewards_lib_NAME.py, imported as NAME
_FRAME_LIMIT = 64 << 20
_AGENT_STATE: dict[str, Any] = sys.__dict__.setdefault("_llm_finetuning_agent_hosts", {
    "pid": None, "hosts": {}, "given": {}, "lock": threading.Lock()})
_HOST_LINK: list[Any] = []  # inside a session: its socket to the trusted side (code tools forward through it)
_IN_AGENT_HOST: list[bool] = []


class AgentCodeRefused(SandboxError):
    """Agent-written code cannot run: the sandbox cannot be built on this host, or the code does not import in it.
    ``fix`` says what to do; nothing of the code ran outside the sandbox."""

    agent_code_refused = True

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


class AgentCallError(Exception):
    """The agent's code raised (``str()`` is its exception's own message) or its process ended."""


class AgentTimeout(AgentCallError):
    """A call ran past its time limit; the session's process was killed."""


_NOT_BUILT = ("run agent-written code (a python verifier, an environment) on Linux as root, or where user "
              "namespaces are allowed (Ubuntu: the AppArmor profile `unprivileged_userns`, or sysctl "
              "kernel.apparmor_restrict_unprivileged_userns=0; docker: --security-opt seccomp=unconfined and "
              "--security-opt apparmor=unconfined, or --privileged)")


def _send_frame(sock: Any, obj: Any) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(len(data).to_bytes(4, "big") + data)


def _recv_exact(sock: Any, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: Any, deadline: float | None = None) -> Any:
    n = int.from_bytes(_recv_exact(sock, 4, deadline), "big")
    if n > _FRAME_LIMIT:
        raise ValueError(f"a message of {n} bytes (at most {_FRAME_LIMIT})")
    return json.loads(_recv_exact(sock, n, deadline))


def provide_sources(folder: str, sources: dict[str, bytes]) -> None:
    """Hand over the bytes of ``folder``'s agent files as checked against the gate (train.py): the rewards.py of
    that folder runs exactly these, never a re-read of files that may have changed since the check."""
    _AGENT_STATE["given"][os.path.realpath(folder)] = dict(sources)


def agent_sources(folder: str, files: Sequence[str]) -> dict[str, str]:
    """name → text of each agent file beside rewards.py: the bytes handed over by provide_sources, else read now."""
    given = _AGENT_STATE["given"].get(os.path.realpath(folder))
    out = {}
    for name in files:
        if given is not None:
            data = given[name]
        else:
            with open(os.path.join(folder, name), "rb") as fh:
                data = fh.read()
        out[name] = data.decode("utf-8")
    return out


def agent_host(sources: dict[str, str], *, folder: str | None = None, allow_env: Sequence[str] = ()) -> AgentHost:
    """The process's host for these sources (one per run folder, source bytes and allowed variables; shared by
    every copy of this module in the process), started on first use."""
    import hashlib

    digest = hashlib.sha256(json.dumps(sorted(sources.items())).encode()).hexdigest()
    key = f"{os.path.realpath(folder or '/')}\0{digest}\0{','.join(allow_env)}"
    state = _AGENT_STATE
    with state["lock"]:
        if state["pid"] != os.getpid():  # a forked child starts its own hosts
            state.update(pid=os.getpid(), hosts={})
        hosts: dict[str, AgentHost] = state["hosts"]
        host = hosts.pop(key, None)
        if host is None or host._closed:
            host = AgentHost(sources, folder=folder, allow_env=allow_env)
        hosts[key] = host  # most recently used last
        while len(hosts) > _AGENT_MAX_HOSTS:
            hosts.pop(next(iter(hosts))).close()
        return host


@atexit.register
def _close_agent_hosts() -> None:
    if _AGENT_STATE["pid"] == os.getpid():
        for host in list(_AGENT_STATE["hosts"].values()):
            host.close()


class AgentHost:
    """A sandboxed interpreter holding agent-written modules (``sources``: file name → text; NAME.py of the agent
    imported as NAME when its file is rewards_lib_NAME.py, else by its file name), ``folder`` (the run folder)
    readable, the environment variables named in ``allow_env`` (and no other) passed in. ``session()`` forks a
    fresh process of it for one batch or episode. Raises AgentCodeRefused when it cannot start."""

    def __init__(self, sources: dict[str, str], *, folder: str | None = None, allow_env: Sequence[str] = (),
                 memory_mb: int = AGENT_MEMORY_MB, python: str | None = None) -> None:
        self.sources, self.folder, self.allow_env = dict(sources), folder, tuple(allow_env)
        self.memory_mb, self._python = memory_mb, python or sys.executable
        self._lock = threading.RLock()  # re-entrant: a stand-in collected mid-call closes its session
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: Any = None
        self._stderr: IO[bytes] | None = None
        self._next, self._closed = 0, False
        self._pool_index: int | None = None

    # -- start / stop -------------------------------------------------------------------------------
    def _config(self, child_fd: int) -> dict[str, Any]:
        if self._pool_index is None:
            self._pool_index = _claim_pool_index()
        imports = [n[:-3] for n in self.sources if not n.startswith(_AGENT_LIB)]
        return {"sources": self.sources, "imports": imports, "folder": self.folder, "ctl_fd": child_fd,
                "uid": _uid_block(self._pool_index), "memory_mb": self.memory_mb, "disk_mb": AGENT_DISK_MB,
                "hide": _default_hide_paths(),
                "env": {n: os.environ[n] for n in self.allow_env if n in os.environ}}

    def _start(self) -> None:
        import socket

        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()
        cfg = self._config(child_end.fileno())
        try:
            proc = subprocess.Popen(
                _child_argv(self._python, ("-s",), "--agent-host"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, env=_agent_spawn_env(), pass_fds=(child_end.fileno(),), cwd="/",
                start_new_session=True)
        except OSError:
            parent_end.close()
            raise
        finally:
            child_end.close()
        self._proc, self._ctl = proc, parent_end
        try:
            stdin, stdout = cast(IO[bytes], proc.stdin), cast(IO[bytes], proc.stdout)
            stdin.write(_own_code_blob() + json.dumps(cfg).encode() + b"\n")
            stdin.close()
            deadline = time.monotonic() + AGENT_START_TIMEOUT_S
            hello = self._hello(stdout, deadline)
            if "error" in hello:
                raise AgentCodeRefused(f"cannot start the sandbox for agent-written code: {hello['error']}",
                                       _NOT_BUILT)
            self._ready(deadline)
        except BaseException:
            self._stop()
            raise

    def _hello(self, stdout: IO[bytes], deadline: float) -> dict[str, Any]:
        ready, _, _ = select.select([stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = stdout.readline() if ready else b""
        try:
            hello = json.loads(line)
        except ValueError:
            hello = None
        if not isinstance(hello, dict):
            raise AgentCodeRefused(f"the sandbox for agent-written code did not start: {self._stderr_tail()}",
                                   _NOT_BUILT)
        return hello

    def _ready(self, deadline: float) -> None:
        """The sandboxed init's first word: ready, or why not (its setup, or an agent module that does not import)."""
        message = None
        try:
            self._ctl.settimeout(max(0.01, deadline - time.monotonic()))
            message = json.loads(self._ctl.recv(1 << 16) or b"null")
        except (OSError, ValueError):
            pass
        if isinstance(message, dict) and message.get("ready") is True:
            return
        if isinstance(message, dict) and isinstance(message.get("import_error"), str):
            raise AgentCodeRefused(
                f"{message['import_error']} (importing it in the sandbox)",
                "fix the module: in the sandbox it has no network, no environment variable but those the person "
                "allowed, a read-only file system (scratch: /tmp) and the run folder to read")
        why = message.get("error") if isinstance(message, dict) else None
        raise AgentCodeRefused(f"cannot start the sandbox for agent-written code: "
                               f"{why if isinstance(why, str) else self._stderr_tail()}", _NOT_BUILT)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return "no output"
        self._stderr.seek(0)
        tail = self._stderr.read()[-400:].decode(errors="replace").strip().replace("\n", " | ")
        return tail or "no output"

    def _stop(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()  # its first process kills the sandbox's init: the whole namespace goes
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait()
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        """Stop the host and every session of it. Idempotent."""
        with self._lock:
            self._closed = True
            self._stop()
            if self._pool_index is not None:
                with _pool_indices_lock:
                    _pool_indices.discard(self._pool_index)
                self._pool_index = None

    def start(self) -> None:
        """Build the sandbox and import the agent's modules now (else on the first session)."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> None:
        if self._closed:
            raise SandboxError("the agent code host is closed")
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            self._start()

    # -- sessions -----------------------------------------------------------------------------------
    def session(self, renew: bool = False) -> AgentSession:
        """A fresh process of the host (a fork: nothing of earlier sessions in it). ``renew``: after a call that
        timed out or ended the process, the next call gets another fresh one (rows of a verifier's batch) rather
        than an error (an environment episode, whose state died with it)."""
        return AgentSession(self, renew)

    def _open(self) -> tuple[int, Any]:
        import socket

        with self._lock:
            self._ensure()
            sid = self._next
            self._next += 1
            mine, theirs = socket.socketpair()
            try:
                socket.send_fds(self._ctl, [json.dumps({"op": "session", "id": sid}).encode()], [theirs.fileno()])
            except OSError as exc:
                mine.close()
                self._stop()
                raise AgentCallError(f"the agent code host is gone ({exc})") from None
            finally:
                theirs.close()
            return sid, mine

    def _kill(self, sid: int) -> None:
        with self._lock:
            if self._ctl is not None:
                try:
                    self._ctl.send(json.dumps({"op": "kill", "id": sid}).encode())
                except OSError:
                    pass

    def describe(self, module: str, name: str) -> dict[str, Any]:
        """The tools of class ``name`` in the agent's ``module``, as _describe_class reports them."""
        with self.session() as session:
            desc = session.call("describe", module=module, cls=name, timeout_s=AGENT_CALL_TIMEOUT_S)
        if not isinstance(desc, dict) or not isinstance(desc.get("tools"), list):
            raise AgentCallError(f"the sandbox did not describe {name}")
        return desc


class AgentSession:
    """One fresh process of an AgentHost (see AgentHost.session); a context manager. ``call(op, ...)`` sends one
    request and returns its plain-data result, serving the code tools the agent's code asks the trusted side for
    meanwhile; raises AgentCallError (the code raised; ``str`` is its message) or AgentTimeout."""

    def __init__(self, host: AgentHost, renew: bool) -> None:
        self.host, self.renew = host, renew
        self._lock = threading.RLock()  # re-entrant: a stand-in collected mid-call closes its session
        self._sid: int | None = None
        self._sock: Any = None
        self._broken: str | None = None

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            if self._sid is not None:
                self.host._kill(self._sid)

    def call(self, op: str, *, timeout_s: float, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None,
             **fields: Any) -> Any:
        with self._lock:
            if self._broken is not None and not self.renew:
                raise AgentCallError(self._broken)
            if self._sock is None:
                self._sid, self._sock = self.host._open()
                self._broken = None
            request = {**fields, "op": op, "args": _encode_plain(list(args)), "kwargs": _encode_plain(kwargs or {})}
            try:
                reply = self._exchange(request, timeout_s)
            except TimeoutError:
                self._broken = f"the call timed out after {timeout_s:g} s (its process was stopped)"
                self._drop()
                raise AgentTimeout(self._broken) from None
            except (EOFError, OSError, ValueError) as exc:
                self._broken = f"the agent code's process ended ({_exception_line(exc)})"
                self._drop()
                raise AgentCallError(self._broken) from None
        if not isinstance(reply, dict):
            raise AgentCallError("unreadable reply from the sandbox")
        if "error" in reply:
            raise AgentCallError(str(reply["error"]))
        try:
            return _decode_value(reply.get("ok"))
        except (ValueError, TypeError, RecursionError):
            raise AgentCallError("unreadable reply from the sandbox") from None

    def _exchange(self, request: dict[str, Any], timeout_s: float) -> Any:
        _send_frame(self._sock, request)
        deadline = time.monotonic() + timeout_s
        while True:
            frame = _recv_frame(self._sock, deadline)
            if not (isinstance(frame, dict) and "callback" in frame):
                return frame
            started = time.monotonic()
            answer = _serve_callback(frame)
            deadline += time.monotonic() - started  # the code tool's own time is not the call's
            _send_frame(self._sock, answer)


def _serve_callback(frame: dict[str, Any]) -> dict[str, Any]:
    """What agent code in the sandbox asks of the trusted side: its code-running tool (run_python), run in this
    process's tool sandbox (the zygote pool: the model's code isolated again, apart from the agent's)."""
    name, given = frame.get("callback"), frame.get("args")
    try:
        if not isinstance(given, dict):
            raise ValueError("malformed callback")
        if name == "tool_pool":
            tool_pool(**{k: given.get(k) for k in ("memory_mb", "min_isolation", "workers")})
            return {"ok": None}
        if name == "execute_python":
            run = execute_python(str(given.get("code", "")), str(given.get("stdin") or ""),
                                 timeout_s=given.get("timeout_s"), max_output_bytes=given.get("max_output_bytes"))
            return {"ok": {k: getattr(run, k) for k in Execution.__dataclass_fields__}}
        raise ValueError(f"no such callback: {name!r}")
    except Exception as exc:  # noqa: BLE001 - the agent's code gets the failure as its own exception
        return {"error": _exception_line(exc), "unavailable": isinstance(exc, SandboxUnavailable)}


def _host_callback(name: str, args: dict[str, Any]) -> Any:
    """Inside a session: ask the trusted side for ``name`` (see _serve_callback) and wait for its answer."""
    if not _HOST_LINK:
        raise SandboxUnavailable("agent-written code reaches the code sandbox only while it is called (a tool, a "
                                 "verifier's call), not while its module is imported")
    _send_frame(_HOST_LINK[0], {"callback": name, "args": args})
    reply = _recv_frame(_HOST_LINK[0])
    if "error" in reply:
        raise (SandboxUnavailable if reply.get("unavailable") else SandboxError)(str(reply["error"]))
    return reply.get("ok")


class _ForwardedPool:
    """tool_pool() inside the agent's sandbox: the code runs in the trusted side's tool sandbox."""

    def run_code(self, code: str, stdin: str = "", timeout_s: float | None = None,
                 max_output_bytes: int | None = None) -> Execution:
        return Execution(**_host_callback("execute_python", {"code": code, "stdin": stdin, "timeout_s": timeout_s,
                                                             "max_output_bytes": max_output_bytes}))


def _agent_spawn_env() -> dict[str, str]:
    """The host's environment at its start: nothing of the caller's (its API keys stay out); a fixed string-hash
    seed, so set iteration orders alike in Phase 1 and in training."""
    return {**_zygote_hashseed_env(), "PYTHONDONTWRITEBYTECODE": "1"}


# ---- the host's side (runs this module's code: `--agent-host`) ----

def _agent_outer(cfg: dict[str, Any]) -> int:
    """The host's first process (trusted, nothing of the agent loaded): the namespaces, then the sandbox's init,
    whose pid it reports on stdout; it waits for it and, on SIGTERM, kills it (and so the whole namespace)."""
    cfg["view"] = _plan_view(_interpreter_paths(), readable=[cfg["folder"]] if cfg.get("folder") else [],
                             hide=[h for h in cfg.get("hide", ()) if h != cfg.get("folder")])
    flags = _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
    userns = os.geteuid() != 0
    try:
        if os.uname().machine not in _SECCOMP_ARCHES:
            raise OSError(f"no system-call filter for {os.uname().machine} (x86_64 and aarch64 only)")
        if not userns:
            try:
                _unshare(flags)
            except OSError:  # root without CAP_SYS_ADMIN: a user namespace of its own still builds the same box
                userns = True
        if userns:
            _enter_user_namespace(flags)
    except OSError as exc:
        print(json.dumps({"error": f"no namespaces: {exc}"}), flush=True)
        return 1
    child: list[int] = []

    def stop(*_: object) -> None:
        for pid in child:
            os.kill(pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _agent_init(cfg, userns)
    child.append(pid)
    os.close(cfg["ctl_fd"])  # the init's alone: its death is then the end of the control socket
    print(json.dumps({"pid": pid}), flush=True)
    while True:
        try:
            os.waitpid(pid, 0)
            return 0
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue


def _set_agent_limits(cfg: dict[str, Any]) -> None:
    import resource

    mem, disk = cfg["memory_mb"] << 20, cfg["disk_mb"] << 20
    for limit, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, disk), (resource.RLIMIT_NOFILE, 1024),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, 512)):
        resource.setrlimit(limit, (value, value))


def _agent_init(cfg: dict[str, Any], userns: bool) -> None:
    """The sandbox's init, PID 1 of its namespace. Trusted: no agent code ever runs in it. It builds the read-only
    view, loads the libraries the agent's modules import (so a session starts fast), has a first session check
    that those modules import, then forks a session per request. Never returns; its exit takes every process of
    the namespace with it."""
    import socket

    ctl = socket.socket(fileno=cfg["ctl_fd"])
    try:
        _enter_view(cfg["view"], cfg["disk_mb"], os.getuid() if userns else cfg["uid"])
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        for name in ("asyncio", "inspect", "typing", "enum", "importlib.util", "resource", "struct"):
            __import__(name)  # what a session's own code uses: loaded once here, not in every fork
        _preload_libraries(cfg["sources"])
    except BaseException as exc:  # noqa: BLE001 - never run the agent's code half-isolated
        ctl.send(json.dumps({"error": _exception_line(exc)}).encode())
        os._exit(_SETUP_FAILED_EXIT)
    verdict = _agent_import_check(cfg, userns)
    ctl.send(json.dumps(verdict).encode())
    if not verdict.get("ready"):
        os._exit(1)
    _agent_serve(ctl, cfg, userns)


def _preload_libraries(sources: dict[str, str]) -> None:
    """Import (in the trusted init) the installed or standard-library modules the agent's files name, so each
    session, a fork, finds them loaded; the agent's own modules are never imported here."""
    import importlib
    import importlib.util

    own = {(n[len(_AGENT_LIB):] if n.startswith(_AGENT_LIB) else n)[:-3] for n in sources} | {"rewards_sandbox"}
    names: set[str] = set()
    for text in sources.values():
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    for name in sorted(n for n in names if n.split(".")[0] not in own):
        try:
            if importlib.util.find_spec(name.split(".")[0]) is not None:
                importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - not a module (a name imported from one), or the session says why
            pass


def _agent_import_check(cfg: dict[str, Any], userns: bool) -> dict[str, Any]:
    """A first session, set up like every other, imports the agent's modules: ready, or which one fails and how.
    It answers through a pipe of its own (never the control socket, which no agent code may hold)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(cfg["ctl_fd"])
        try:
            _agent_session_setup(cfg, userns)
        except BaseException as exc:  # noqa: BLE001
            os.write(write_end, json.dumps({"error": _exception_line(exc)}).encode())
            os._exit(_SETUP_FAILED_EXIT)
        verdict: dict[str, Any] = {"ready": True}
        for name in cfg["imports"]:
            try:
                __import__(name)
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: an import that exits did not import
                verdict = {"import_error": f"{name}.py: {_exception_line(exc)}"}
                break
        os.write(write_end, json.dumps(verdict).encode())
        os._exit(0)
    os.close(write_end)
    data, deadline = b"", time.monotonic() + AGENT_IMPORT_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0 and select.select([read_end], [], [], left)[0]:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        data += chunk[:4096]
    os.close(read_end)
    if not data:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return {"import_error": f"{', '.join(m + '.py' for m in cfg['imports'])}: still importing after "
                                f"{AGENT_IMPORT_TIMEOUT_S:g} s (a module must import quickly: no waiting at import)"}
    os.waitpid(pid, 0)
    try:
        said = json.loads(data)
    except ValueError:
        said = None
    return said if isinstance(said, dict) else {"error": "the first session died while importing"}


def _agent_session_setup(cfg: dict[str, Any], userns: bool) -> None:
    """In a session's process, still privileged: a mount namespace of its own with fresh scratch dirs (what a
    session writes is gone with it: nothing carries to the next), the limits, no privilege left, the system-call
    filter, a clean environment, the agent's modules importable."""
    _unshare(_CLONE_NEWNS)
    _fresh_scratch(cfg["view"], cfg["disk_mb"])
    owner = os.getuid() if userns else cfg["uid"]
    os.mkdir(_NS_WORKDIR, 0o700)
    os.chown(_NS_WORKDIR, owner, owner)
    _set_agent_limits(cfg)
    if userns:
        _drop_capabilities()
    else:
        _drop_privileges(cfg["uid"])
    _prctl(_PR_SET_DUMPABLE, 0)  # no other session (same uid) reads its memory
    _apply_seccomp(_SECCOMP_DENIED_AGENT)
    os.chdir(_NS_WORKDIR)
    os.environ.clear()
    os.environ.update({"PATH": _SAFE_PATH, "HOME": _NS_WORKDIR, "TMPDIR": _NS_WORKDIR, "LANG": "C.UTF-8",
                       "PYTHONIOENCODING": "utf-8", "PYTHONHASHSEED": "0", **cfg["env"]})
    _install_agent_modules(cfg["sources"], cfg.get("folder") or _NS_WORKDIR)


def _fresh_scratch(plan: dict[str, Any], disk_mb: int) -> None:
    """New tmpfs on the scratch dirs of this mount namespace; anything bound inside them (a run folder or venv
    under /tmp) bound again, read-only."""
    inside = sorted((b for b in plan["binds"] if any(_under(b, d) for d in _SCRATCH_DIRS)), key=len)
    fds = {b: os.open(b, os.O_PATH | os.O_CLOEXEC) for b in inside}
    try:
        for path, size in _SCRATCH_DIRS.items():
            _mount("sandbox", path, "tmpfs", _MS_NOSUID | _MS_NODEV,
                   f"size={min(size or disk_mb, disk_mb)}m,mode=1777,nr_inodes=4096")
        for path in inside:
            _bind_into("", path, fds[path])
    finally:
        for fd in fds.values():
            os.close(fd)
    if inside:
        _remount_readonly(skip=tuple(_SCRATCH_DIRS))


def _install_agent_modules(sources: dict[str, str], folder: str) -> None:
    """The agent's files become importable by exact name, ahead of sys.path (rewards_user_X and rewards_env by
    their file names, rewards_lib_NAME.py as NAME), and `rewards_sandbox` is this module: its code tools forward
    to the trusted side."""
    import importlib.util

    by_module = {(n[len(_AGENT_LIB):] if n.startswith(_AGENT_LIB) else n)[:-3]: n for n in sources}

    class _AgentFinder:
        @staticmethod
        def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname not in by_module:
                return None
            return importlib.util.spec_from_loader(fullname, _AgentFinder,  # type: ignore[arg-type]
                                                   origin=os.path.join(folder, by_module[fullname]))

        @staticmethod
        def create_module(spec: Any) -> None:
            return None

        @staticmethod
        def exec_module(module: Any) -> None:
            module.__file__ = module.__spec__.origin
            source = sources[by_module[module.__name__]]
            exec(compile(source, module.__spec__.origin, "exec"), module.__dict__)

    sys.meta_path.insert(0, _AgentFinder)
    _IN_AGENT_HOST.append(True)
    sys.modules["rewards_sandbox"] = sys.modules[__name__]


def _agent_serve(ctl: Any, cfg: dict[str, Any], userns: bool) -> None:
    """The init's loop: a session request (with its socket) forks a session; a kill request ends one."""
    import socket

    sessions: dict[int, Any] = {}  # pid -> session id
    signal.signal(signal.SIGCHLD, lambda *_: _reap_sessions(sessions))  # no zombie waits for the next request
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        except OSError:
            break
        if not data:
            break
        try:
            req = json.loads(data)
        except ValueError:
            req = {}
        if isinstance(req, dict) and req.get("op") == "session" and fds:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # recorded before it can be reaped
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
                ctl.close()
                for extra in fds[1:]:
                    os.close(extra)
                _agent_session(socket.socket(fileno=fds[0]), cfg, userns)
            sessions[pid] = req.get("id")
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        elif isinstance(req, dict) and req.get("op") == "kill":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # no pid reaped (and reused) meanwhile
            for pid, sid in list(sessions.items()):
                if sid == req.get("id"):
                    os.kill(pid, signal.SIGKILL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        for fd in fds:
            os.close(fd)
    os._exit(0)


def _reap_sessions(sessions: dict[int, Any]) -> None:
    """Reap every exited process of the namespace (the init's duty); forget sessions that were among them."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sessions.pop(pid, None)


def _agent_session(sock: Any, cfg: dict[str, Any], userns: bool) -> None:
    """A session: set up, the agent's modules imported, then requests in, one reply each, until the trusted side
    closes it. Never returns."""
    try:
        _agent_session_setup(cfg, userns)
        for name in cfg["imports"]:
            __import__(name)
    except BaseException as exc:  # noqa: BLE001 - every call of this session then fails with why
        _send_frame(sock, {"error": f"the session did not start: {_exception_line(exc)}"})
        os._exit(_SETUP_FAILED_EXIT)
    _HOST_LINK.append(sock)
    instance: list[Any] = [None]
    while True:
        try:
            req = _recv_frame(sock)
        except BaseException:  # noqa: BLE001 - closed, or garbage: the session is over
            os._exit(0)
        try:
            reply = {"ok": _encode_plain(_agent_request(req, instance))}
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the call failed, the session lives on
            try:
                reply = {"error": str(exc)}
            except BaseException:  # noqa: BLE001 - a hostile __str__
                reply = {"error": type(exc).__name__}
        try:
            _send_frame(sock, reply)
        except BaseException:  # noqa: BLE001
            os._exit(0)


def _agent_request(req: Any, instance: list[Any]) -> Any:
    import asyncio
    import inspect

    if not isinstance(req, dict):
        raise ValueError("malformed request")
    op, args, kwargs = req.get("op"), _decode_value(req.get("args")), _decode_value(req.get("kwargs"))
    if op == "verify":
        result = getattr(sys.modules[req["module"]], req["function"])(*args, **kwargs)
    elif op == "new":
        instance[0] = getattr(sys.modules[req["module"]], req["cls"])()
        return None
    elif op == "call":
        if instance[0] is None:
            raise RuntimeError("no instance in this session")
        result = getattr(instance[0], req["method"])(*args, **kwargs)
    elif op == "describe":
        return _describe_class(getattr(sys.modules[req["module"]], req["cls"]))
    else:
        raise ValueError(f"unknown request {op!r}")
    return asyncio.run(result) if inspect.iscoroutine(result) else result


# ---- environment classes: proxies in the trusted process, the real instance in a session ----

_PARAM_KINDS = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD")
_PLAIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple, "dict": dict,
                "bytes": bytes, "complex": complex, "set": set, "frozenset": frozenset, "None": type(None)}


def _type_tree(hint: Any, depth: int = 0) -> Any:
    """A type hint as plain data (builtins, None, Any, Union / Optional, Literal, list / tuple / dict / set
    generics, Enum classes; anything else by name), rebuilt on the trusted side by _rebuild_type."""
    import enum
    import types
    import typing

    if depth > 20:
        return {"opaque": "nested too deeply"}
    if hint is None or hint is type(None):
        return "None"
    if hint is typing.Any:
        return "Any"
    if isinstance(hint, type) and hint.__name__ in _PLAIN_TYPES and _PLAIN_TYPES[hint.__name__] is hint:
        return hint.__name__
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is getattr(types, "UnionType", None):
        return {"union": [_type_tree(a, depth + 1) for a in args]}
    if origin is typing.Literal:
        return {"literal": _encode_plain(list(args))}
    if origin in (list, tuple, dict, set, frozenset):
        return {"generic": origin.__name__, "args": ["..." if a is Ellipsis else _type_tree(a, depth + 1)
                                                      for a in args]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": hint.__name__, "members": _encode_plain([[m.name, m.value] for m in hint])}
    return {"opaque": str(getattr(hint, "__name__", None) or repr(hint))[:80]}


def _rebuild_type(tree: Any, depth: int = 0) -> Any:
    """The type hint _type_tree described (a class of the same name standing in for an opaque one)."""
    import enum
    import typing

    if depth > 20:
        raise ValueError("type nested too deeply")
    if isinstance(tree, str):
        return typing.Any if tree == "Any" else _PLAIN_TYPES[tree]
    if not isinstance(tree, dict) or len(tree) not in (1, 2):
        raise ValueError("not a type description")
    if "union" in tree:
        return typing.Union[tuple(_rebuild_type(t, depth + 1) for t in tree["union"])]  # noqa: UP007
    if "literal" in tree:
        return typing.Literal[tuple(_decode_value(tree["literal"]))]
    if "generic" in tree:
        origin: Any = {"list": list, "tuple": tuple, "dict": dict, "set": set, "frozenset": frozenset}[tree["generic"]]
        args = tuple(Ellipsis if a == "..." else _rebuild_type(a, depth + 1) for a in tree["args"])
        return origin[args] if args else origin
    if "enum" in tree:
        return enum.Enum(str(tree["enum"]), [(str(n), v) for n, v in _decode_value(tree["members"])])
    return type(str(tree["opaque"]), (), {})


def _describe_class(cls: Any) -> dict[str, Any]:
    """The tools of an environment class as TRL finds them (public functions on the class other than reset and
    get_reward), each with what transformers' get_json_schema reads: name, docstring, signature as bound to an
    instance, resolved type hints; and whether it is a coroutine function."""
    import inspect
    import typing

    tools = []
    for name, func in inspect.getmembers(cls, predicate=inspect.isfunction):
        if name.startswith("_") or name in ("reset", "get_reward"):
            continue
        static = isinstance(inspect.getattr_static(cls, name), staticmethod)
        params = list(inspect.signature(func).parameters.values())[0 if static else 1:]
        try:
            hints: dict[str, Any] | None = {k: _type_tree(v) for k, v in typing.get_type_hints(func).items()}
        except Exception:  # noqa: BLE001 - unresolvable: the proxy's own resolution fails the same way
            hints = None
        described = []
        for p in params:
            entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name,
                                     "annotated": p.annotation is not inspect.Parameter.empty}
            if p.default is not inspect.Parameter.empty:
                try:
                    entry["default"] = _encode_plain(p.default)
                except (TypeError, ValueError):
                    entry["default_opaque"] = True
            described.append(entry)
        tools.append({"name": name, "doc": inspect.getdoc(func), "async": inspect.iscoroutinefunction(func),
                      "params": described, "hints": hints})
    return {"tools": tools, "doc": inspect.getdoc(cls)}


class _OpaqueDefault:
    def __repr__(self) -> str:
        return "<default>"


def _proxy_tool(class_name: str, spec: dict[str, Any]) -> Callable[..., Any]:
    """A function standing in for one tool: the same name, docstring, signature and type hints (so TRL lists it
    and get_json_schema gives the same schema), forwarding the call to the instance in the session."""
    import inspect

    name = spec["name"]
    if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")
            and name not in ("reset", "get_reward")):
        raise AgentCallError(f"the sandbox described a tool named {name!r}")
    if spec.get("async"):
        async def tool(self: Any, *args: Any, **kwargs: Any) -> Any:
            import asyncio

            return await asyncio.get_running_loop().run_in_executor(None, lambda: self._agent_call(name, args, kwargs))
    else:
        def tool(self: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return self._agent_call(name, args, kwargs)
    hints = spec.get("hints")
    # Hints the sandbox could not resolve stay unresolvable here, by a name no namespace holds: a string from the
    # sandbox is never what get_type_hints evaluates in this process.
    annotations: dict[str, Any] = ({k: _rebuild_type(v) for k, v in hints.items()} if isinstance(hints, dict)
                                   else {p["name"]: "_unresolved_in_the_sandbox_" for p in spec["params"]
                                         if p.get("annotated")})
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in spec["params"]:
        kind = getattr(inspect.Parameter, _PARAM_KINDS[_PARAM_KINDS.index(p["kind"])])
        default = (_decode_value(p["default"]) if "default" in p
                   else _OpaqueDefault() if p.get("default_opaque") else inspect.Parameter.empty)
        annotation = annotations.get(p["name"], inspect.Parameter.empty) if p.get("annotated") \
            else inspect.Parameter.empty
        params.append(inspect.Parameter(p["name"], kind, default=default, annotation=annotation))
    tool.__name__, tool.__qualname__ = name, f"{class_name}.{name}"
    tool.__doc__ = spec.get("doc") if isinstance(spec.get("doc"), str) else None
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=annotations.get("return", inspect.Signature.empty))
    tool.__annotations__ = annotations
    return tool


class _AgentEnvironment:
    """Base of the proxy environment classes (see environment_class). Every reset starts a fresh session holding
    a fresh instance, so an episode never sees an earlier one's state, whether TRL reuses the proxy or not."""

    _agent_host: AgentHost
    _agent_module: str
    _agent_class: str
    get_reward = None  # not a function: TRL's environment probe adds no reward of its own

    def __init__(self) -> None:
        self._agent_session: AgentSession | None = None

    def _agent_fresh(self) -> AgentSession:
        if self._agent_session is not None:
            self._agent_session.close()
        session = self._agent_host.session()
        session.call("new", module=self._agent_module, cls=self._agent_class, timeout_s=AGENT_CALL_TIMEOUT_S)
        self._agent_session = session
        return session

    def _agent_call(self, method: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None) -> Any:
        session = self._agent_session or self._agent_fresh()
        return session.call("call", method=method, args=args, kwargs=kwargs, timeout_s=AGENT_CALL_TIMEOUT_S)

    def reset(self, **kwargs: Any) -> Any:
        self._agent_fresh()
        return self._agent_call("reset", (), kwargs)

    def _finetune_get_reward(self) -> Any:
        return self._agent_call("get_reward")

    def __del__(self) -> None:
        try:
            if self._agent_session is not None:
                self._agent_session.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the host may be gone already
            pass


def environment_class(host: AgentHost, module: str, name: str) -> type:
    """A class standing in for the agent's environment class ``name`` (in ``module``, run by ``host``): its tools
    are functions of the same name, docstring, signature and type hints; calling one, reset or get_reward
    (as ``_finetune_get_reward``) runs the real instance's method in the sandbox and returns its plain-data result
    (an exception there raises AgentCallError with the same message)."""
    desc = host.describe(module, name)
    namespace: dict[str, Any] = {"__doc__": desc.get("doc") if isinstance(desc.get("doc"), str) else None,
                                 "__qualname__": name, "_agent_host": host, "_agent_module": module,
                                 "_agent_class": name}
    for spec in desc["tools"]:
        if not isinstance(spec, dict):
            raise AgentCallError(f"the sandbox did not describe {name}")
        try:
            namespace[spec["name"]] = _proxy_tool(name, spec)
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise AgentCallError(f"the sandbox described {name} unreadably ({_exception_line(exc)})") from None
    return type(name, (_AgentEnvironment,), namespace)


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--zygote"]:
        _zygote_main(json.loads(sys.stdin.buffer.readline()))
        return 0
    if argv[:1] == ["--agent-host"]:
        return _agent_outer(json.loads(sys.stdin.buffer.readline()))
    if argv[:1] == ["--probe"]:
        iso = _probe(_uid_block(_POOLS_PER_PROCESS - 1) + _UID_BLOCK - 1)
        print(json.dumps({**iso.__dict__, "notes": list(iso.notes)}))
        return 0
    if argv[:1] == ["--kill-uid"]:
        _kill_uid(int(argv[1]))
        return 0
    print(detect_isolation().describe())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
