"""Atomic file writes: write to a temp file in the target folder, fsync, then rename.

A reader never sees a partial file and a failed stage never leaves one behind. Existing files are
only ever replaced by a complete new version.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
from pathlib import Path

CRASH_ENV = "FINETUNE_TEST_CRASH_AT"


def crash_point(step: str) -> None:
    """Tests only: die here, as a power cut or OOM kill would, when CRASH_ENV names this step."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the pid in the name lets the next run tell a crashed writer's temp file from a live one (commit.recover)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        crash_point(f"write:{path.name}")  # tests only: die with the temp file written
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: str | Path, text: str, mode: int | None = None) -> Path:
    return write_bytes(path, text.encode("utf-8"), mode=mode)


def append_bytes(path: str | Path, data: bytes) -> None:
    """One O_APPEND write to a regular file of this folder: a symbolic link planted at ``path`` is refused
    (O_NOFOLLOW), and so is a file with another hard link, so a log append never lands in a file outside
    the run directory (a shell profile, another run's log). OSError names the path."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise OSError(errno.EMLINK, "not a file of its own (a hard link or a special file)", str(path))
        os.write(fd, data)
    finally:
        os.close(fd)
