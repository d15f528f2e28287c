"""A Hugging Face cache built from a local model folder (imported as a plain module by tests)."""

from __future__ import annotations

import os
from pathlib import Path

HUB_REPO_ID = "finetune-tests/tiny-qwen3"


def install_in_hf_cache(model_dir: Path, hub_cache: Path, repo_id: str) -> Path:
    """Lay ``model_dir`` out as huggingface_hub caches a download: blobs named by content digest,
    ``snapshots/<commit>/<file>`` symlinks to them, ``refs/main`` naming the commit. Returns the snapshot."""
    import hashlib

    repo = hub_cache / ("models--" + repo_id.replace("/", "--"))
    files = sorted(p for p in model_dir.rglob("*") if p.is_file())
    commit = hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()
    snapshot = repo / "snapshots" / commit
    for f in files:
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(f.read_bytes())
        link = snapshot / f.relative_to(model_dir)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)  # huggingface_hub writes no newline
    return snapshot
