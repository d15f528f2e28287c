"""Atomic file writes: write to a temp file in the target folder, fsync, then rename.

A reader never sees a partial file and a failed stage never leaves one behind. Existing files are
only ever replaced by a complete new version.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator


def write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
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


@contextlib.contextmanager
def staged_dir(target: str | Path) -> Iterator[Path]:
    """Yield a temp folder beside ``target``; on success its files are moved into ``target``.

    Used for stages that write several files (config/): either all of them land or none.
    Files already in ``target`` that the stage does not write are left untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        target.mkdir(parents=True, exist_ok=True)
        for src in sorted(tmp.rglob("*")):
            if src.is_file():
                dst = target / src.relative_to(tmp)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
