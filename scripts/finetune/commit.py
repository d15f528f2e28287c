"""Multi-file outputs switched all at once, staged inside the run directory.

Two shapes of output need more than one rename:

* a folder (``config/``, ``diagnosis/``): the new folder is staged beside it as
  ``.<name>.<pid>.<token>.stage`` and swapped in with one ``renameat2(RENAME_EXCHANGE)`` — readers see the
  old folder or the new one, never a mix. (Where the kernel/file system lacks the exchange, a journal
  written before the two renames lets the next run roll forward.)
* loose files in the run directory (``rewards.py`` + ``rewards_*.py``): staged, then a journal naming
  every rename is written atomically — the commit point — then the renames run. A crash before the
  journal leaves the old files; a crash after it is rolled forward by the next run (:func:`recover`).

Every commit holds the run directory's lock (:mod:`finetune.locks`) from staging to cleanup, so any
stage folder or journal found *under the lock* belongs to a process that died: :func:`recover` (called
by :func:`finetune.rundir.resolve`, i.e. by every verb, and by each commit) rolls journals forward and
deletes the leftovers, including atomic-write temp files (``.scored.jsonl.<pid>.<token>.tmp``) whose
writer is gone.

``FINETUNE_TEST_CRASH_AT=<step>`` makes the process SIGKILL itself at that step: a hook for the crash
tests only (steps: ``write:<file name>`` in :func:`finetune.atomic.write_bytes`, ``<folder>:staged``,
``<folder>:switched``, ``files:staged``, ``files:journal``,
``files:rename:<name>``, ``files:renamed``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from finetune import jsonio, locks
from finetune.atomic import crash_point  # the one crash hook, shared with every atomic write
from finetune.errors import UserError

STALE_UNOWNED_S = 3600  # temp files without a pid in their name (older versions) count as stale after this
_STAGE = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.stage$")
_OLD = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.old$")
_JOURNAL = re.compile(r"^\.commit\.(\d+)\.[0-9a-f]{8}\.journal$")
_TMP = re.compile(r"^\..+\.tmp$")
_TMP_PID = re.compile(r"^\..+\.(\d+)\.[^.]+\.tmp$")
_RENAME_EXCHANGE = 2


def _name(base: str, kind: str) -> str:
    return f".{base}.{os.getpid()}.{secrets.token_hex(4)}.{kind}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2). False when this kernel / file system cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), str(b))


def _write_file(path: Path, data: str | bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())
    if mode is not None:
        os.chmod(path, mode)


@contextlib.contextmanager
def staged_dir(target: str | Path, keep: Callable[[str], bool] = lambda name: True) -> Iterator[Path]:
    """Yield an empty stage folder inside ``target``'s parent; on success ``target`` becomes the stage
    plus the entries of the old ``target`` it did not write and ``keep(name)`` accepts, in one switch."""
    target = Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    with locks.file_lock(parent):
        recover(parent)
        stage = parent / _name(target.name, "stage")
        stage.mkdir()
        try:
            yield stage
            # a target that is a symbolic link is replaced by the real folder: nothing is read through it
            if target.is_dir() and not target.is_symlink():
                for old in target.iterdir():
                    if not (stage / old.name).exists() and keep(old.name):
                        (shutil.copytree if old.is_dir() else shutil.copy2)(old, stage / old.name)
            _fsync_dir(stage)
            crash_point(f"{target.name}:staged")
            _switch_dir(stage, target)
            crash_point(f"{target.name}:switched")
        finally:
            if stage.is_symlink():  # the old target was a link: after the swap the stage name holds it
                stage.unlink()
            shutil.rmtree(stage, ignore_errors=True)  # after a switch it holds the old folder


def _switch_dir(stage: Path, target: Path) -> None:
    parent = target.parent
    if not target.exists():
        os.rename(stage, target)
    elif not _exchange(stage, target):  # no atomic swap here: journal, then two renames
        old = parent / _name(target.name, "old")
        journal = parent / _name("commit", "journal")
        jsonio.write_json(journal, {"renames": [[target.name, old.name], [stage.name, target.name]],
                                    "remove": [], "cleanup": [old.name]})
        _roll_forward(parent, journal)
        return
    _fsync_dir(parent)


def commit_files(run_dir: str | Path, files: Mapping[str, str | bytes], remove: tuple[str, ...] = (),
                 modes: dict[str, int] | None = None, check: Callable[[], None] | None = None) -> list[Path]:
    """Write ``files`` and delete ``remove`` as one commit (journal + renames). Names are relative to the
    run directory and may name a sub-folder (``data/filtered.jsonl``), created when the commit switches.

    ``check`` runs under the run directory's lock before anything is staged: a writer whose output was
    computed from files it read earlier (``inspect score``) re-checks them there and raises to write
    nothing, so two writers never commit results of different inputs one over the other unnoticed.
    """
    run_dir = Path(run_dir)
    for name in (*files, *remove):
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"commit_files: {name!r} is not a path inside the run directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    with locks.file_lock(run_dir):
        recover(run_dir)
        if check is not None:
            check()
        stage = run_dir / _name("files", "stage")
        try:
            journal = _stage(run_dir, stage, files, remove, modes)
            crash_point("files:journal")  # the commit point: from here the next run rolls forward
            _roll_forward(run_dir, journal, crash=True)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return [run_dir / n for n in files]


def _stage(run_dir: Path, stage: Path, files: Mapping[str, str | bytes], remove: tuple[str, ...],
           modes: dict[str, int] | None) -> Path:
    """Write the staged files and the journal (nothing visible changes yet); returns the journal.

    An OSError here names the output it was for (``verdicts.jsonl``), not the internal stage or journal
    file: the user's fix (permissions, space) is about the run directory's file they asked for."""
    target = next(iter(files), None)
    try:
        stage.mkdir()
        for target, data in files.items():  # noqa: B007 - the file being written is the one an error names
            _write_file(stage / target, data, (modes or {}).get(target))
        _fsync_dir(stage)
        crash_point("files:staged")
        target = next(iter(files), None)
        journal = run_dir / _name("commit", "journal")
        jsonio.write_json(journal, {"renames": [[f"{stage.name}/{n}", n] for n in files],
                                    "remove": [n for n in remove if n not in files], "cleanup": [stage.name]})
    except OSError as exc:
        if target is None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(run_dir / target)) from exc
    return journal


def _roll_forward(run_dir: Path, journal: Path, crash: bool = False) -> None:
    """Finish a committed journal: each rename whose source still exists, the removals, the cleanup."""
    plan = jsonio.read_json(journal)
    for src, dst in plan["renames"]:
        if (run_dir / src).exists():
            (run_dir / dst).parent.mkdir(parents=True, exist_ok=True)
            os.replace(run_dir / src, run_dir / dst)
        if crash:
            crash_point(f"files:rename:{dst}")
    for name in plan["remove"]:
        with contextlib.suppress(FileNotFoundError):
            (run_dir / name).unlink()
    for folder in sorted({(run_dir / dst).parent for _, dst in plan["renames"]} - {run_dir}):
        if folder.is_dir():
            _fsync_dir(folder)
    _fsync_dir(run_dir)
    if crash:
        crash_point("files:renamed")
    for name in plan["cleanup"]:
        shutil.rmtree(run_dir / name, ignore_errors=True)
    journal.unlink()
    _fsync_dir(run_dir)


def pending(run_dir: str | Path) -> list[str]:
    """Names a committed but unfinished commit (a journal) will still replace or remove; [] when none.

    For read-only callers (``finetune status``) that do not :func:`recover`: while this is non-empty the
    files on disk may be half old, half new, and nothing read from them should be called current.
    """
    run_dir = Path(run_dir)
    names: list[str] = []
    for journal in sorted(p for p in _leftovers(run_dir) if _JOURNAL.match(p.name)):
        try:
            plan = jsonio.read_json(journal)
        except UserError:  # finished meanwhile (gone), or damaged: a damaged one still means "not settled"
            if journal.exists():
                return [journal.name]
            continue
        names += [dst for src, dst in plan["renames"] if (run_dir / src).exists()]
        names += [n for n in plan["remove"] if (run_dir / n).exists()]
    return names


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(run_dir: Path) -> list[Path]:
    try:
        return [p for p in run_dir.iterdir() if p.name.startswith(".")
                and (_STAGE.match(p.name) or _OLD.match(p.name) or _JOURNAL.match(p.name) or _TMP.match(p.name))]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def recover(run_dir: str | Path) -> None:
    """Roll forward committed journals and remove what crashed commits and writers left behind."""
    run_dir = Path(run_dir)
    if not _leftovers(run_dir):
        return  # the common case: nothing to do, nothing written, no lock taken
    with locks.file_lock(run_dir):
        # A commit holds this lock from staging to cleanup, so another process's journal seen here is a
        # dead commit's: finish it.
        for journal in sorted(p for p in _leftovers(run_dir) if _JOURNAL.match(p.name)):
            jm = _JOURNAL.match(journal.name)
            if jm and int(jm.group(1)) != os.getpid():
                _roll_forward(run_dir, journal)
        for p in _leftovers(run_dir):
            owned = _STAGE.match(p.name) or _OLD.match(p.name)
            if owned:
                if int(owned.group(1)) != os.getpid():
                    shutil.rmtree(p, ignore_errors=True)
            elif _TMP.match(p.name) and p.is_file():
                m = _TMP_PID.match(p.name)
                stale = (not _pid_alive(int(m.group(1)))) if m else time.time() - p.stat().st_mtime > STALE_UNOWNED_S
                if stale:
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
