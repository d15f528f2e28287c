"""Atomic file writes: write to a temp file in the target folder, fsync, then rename.

A reader never sees a partial file and a failed stage never leaves one behind. Existing files are
only ever replaced by a complete new version.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


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
        if os.environ.get("FINETUNE_TEST_CRASH_AT"):  # tests only: die with the temp file written
            from finetune.commit import crash_point

            crash_point(f"write:{path.name}")
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


def write_json(path: str | Path, obj: Any) -> Path:
    """Kept for callers; the encoding rules live in :mod:`finetune.jsonio` (the one JSON writer)."""
    from finetune import jsonio

    return jsonio.write_json(path, obj)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    """Kept for callers; see :func:`finetune.jsonio.write_jsonl`."""
    from finetune import jsonio

    return jsonio.write_jsonl(path, rows)


def staged_dir(target: str | Path) -> contextlib.AbstractContextManager[Path]:
    """A stage folder inside ``target``'s parent, switched in as a whole (:func:`finetune.commit.staged_dir`).

    Files already in ``target`` that the stage does not write are carried over.
    """
    from finetune import commit

    return commit.staged_dir(target)


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
