"""One writer at a time for shared run files (verdicts.jsonl, acks.json, confirmation.json).

``finetune inspect verdict`` is read-merge-write: two at once each read the old file and the second
rename drops the first one's verdict. :func:`file_lock` serialises them; callers
re-read the file *inside* the lock, so every update builds on the latest one.

The lock is ``flock`` on the run directory itself (an fd opened on the folder), not on a lock file:
taking it writes nothing, so a refused command still leaves the run directory byte-identical, and a
crashed holder releases it when the kernel closes its fd. Re-entrant within a process (a confirmation
taken while a verdict write holds the lock does not deadlock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_held: dict[str, tuple[int, int]] = {}  # folder → (fd, depth) held by this process
_guard = threading.RLock()


def _folder(path: Path) -> str:
    """The folder whose lock guards ``path`` (the path itself when it is a folder)."""
    target = path if path.is_dir() else path.parent
    return os.path.realpath(target)


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold the exclusive lock guarding ``path`` (its run directory) for the ``with`` body."""
    key = _folder(Path(path))
    with _guard:  # threads of one process share the flock, so they queue here
        if key in _held:
            fd, depth = _held[key]
            _held[key] = (fd, depth + 1)
        else:
            fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            _held[key] = (fd, 1)
        try:
            yield
        finally:
            fd, depth = _held[key]
            if depth == 1:
                del _held[key]
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            else:
                _held[key] = (fd, depth - 1)
