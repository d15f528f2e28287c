"""Resolve a model named in a spec the way transformers does: local folder → HF cache → hub download.

``resolve_model`` returns a folder holding config.json, weights and tokenizer (sampling, the demo);
``resolve_config`` returns only a config.json (memory estimates: a 70B model's estimate must not
download 140 GB). Both go through huggingface_hub itself, so the cache layout, ``HF_HOME`` /
``HF_HUB_CACHE``, tokens and ``HF_HUB_OFFLINE`` mean what they mean to transformers and TRL.

huggingface_hub reads ``HF_HOME`` / ``HF_HUB_OFFLINE`` once, at import; this module reads them at
call time (the cache folder is passed explicitly), so a process that changes them after importing
transformers still resolves against the cache it names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from finetune.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

# What a model folder needs for sampling and training; the rest of a repo (other weight formats,
# README, images, onnx/gguf exports) is not downloaded.
WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json")
LEGACY_WEIGHT_PATTERNS = ("*.bin", "*.bin.index.json")
SUPPORT_PATTERNS = ("*.json", "*.model", "*.txt", "*.tiktoken", "*.jinja", "tokenizer*")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_TRUE = {"1", "on", "yes", "true"}


def hub_cache_dir() -> Path:
    """The HF cache folder as transformers would use it now: $HF_HUB_CACHE, else $HF_HOME/hub."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set: the cache is the only source."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def is_repo_id(value: str) -> bool:
    """``org/name`` as the hub spells it (a single slash, no path prefix)."""
    return bool(_REPO_ID.match(value)) and not value.endswith((".json", ".yaml"))


def local_path(model: str, base_dir: str | Path | None) -> Path:
    """``model`` as a path (relative paths against ``base_dir``, the spec's folder)."""
    p = Path(model).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


def _is_model_folder(folder: Path) -> bool:
    has_weights = any(any(folder.glob(pat)) for pat in WEIGHT_PATTERNS + LEGACY_WEIGHT_PATTERNS)
    return (folder / "config.json").is_file() and has_weights


def _offline_error(model: str, what: str) -> UserError:
    return UserError(f"model '{model}': {what} in the Hugging Face cache ({hub_cache_dir()}) and HF_HUB_OFFLINE=1 "
                     "forbids downloading it", where="model",
                     fix=f"download it where the hub is reachable (`hf download {model}`) into this cache, unset "
                         "HF_HUB_OFFLINE, or point `model` at a local folder")


def _hub_error(model: str, exc: Exception) -> UserError:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(exc, GatedRepoError):
        return UserError(f"model '{model}' is gated on the Hugging Face Hub", where="model",
                         fix=f"accept its licence on huggingface.co/{model} and log in (`hf auth login` or HF_TOKEN)")
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(f"model '{model}' does not exist on the Hugging Face Hub (or is private)", where="model",
                         fix="check the spelling of the hub id, log in for a private repo, or point `model` at a "
                             "local folder")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"model '{model}' is not in the Hugging Face cache ({hub_cache_dir()}) and the hub could not be "
                     f"reached: {first}", where="model",
                     fix="check the network (or HF_ENDPOINT / proxy), set HF_HUB_OFFLINE=1 after downloading it "
                         "elsewhere into this cache, or point `model` at a local folder")


def cached_model(model: str, base_dir: str | Path | None = None) -> Path | None:
    """A complete model folder for ``model`` without any network: the local folder, else the HF cache."""
    p = local_path(model, base_dir)
    if p.is_dir():
        return p
    if not is_repo_id(model):
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(model, cache_dir=hub_cache_dir(), local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):  # not cached, incomplete, or not a valid id
        return None
    return folder if _is_model_folder(folder) else None


def resolve_model(model: str, base_dir: str | Path | None = None, *, console: Console | None = None) -> Path:
    """The folder to load ``model`` from: a local folder, the HF cache, or a hub download (progress bar).

    A name that is neither a folder nor a hub id, or a hub id that cannot be found / fetched, is a
    UserError naming the id (and HF_HUB_OFFLINE when that is what stopped it).
    """
    p = local_path(model, base_dir)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise UserError(f"model folder {p} has no config.json", where="model",
                            fix="point `model` at a saved model folder (config.json, weights, tokenizer)")
        return p
    if not is_repo_id(model):
        raise UserError(f"model not found: {p}", where="model",
                        fix="point `model` at a local folder (config.json, weights, tokenizer) or a hub id org/name")
    found = cached_model(model, base_dir)
    if found is not None:
        return found
    if offline():
        raise _offline_error(model, "the model (config, weights, tokenizer) is not complete")
    return _download(model, console)


def _download(model: str, console: Console | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    if console is not None:
        console.print(f"downloading [bold]{model}[/] from the Hugging Face Hub into {hub_cache_dir()}")
    try:
        folder = Path(snapshot_download(model, cache_dir=hub_cache_dir(),
                                        allow_patterns=list(WEIGHT_PATTERNS + SUPPORT_PATTERNS)))
        if not _is_model_folder(folder):  # an older repo with only PyTorch .bin weights
            folder = Path(snapshot_download(model, cache_dir=hub_cache_dir(),
                                            allow_patterns=list(LEGACY_WEIGHT_PATTERNS + SUPPORT_PATTERNS)))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise _hub_error(model, exc) from None
    if not _is_model_folder(folder):
        raise UserError(f"model '{model}' on the hub has no config.json with safetensors or .bin weights",
                        where="model", fix="name a transformers model repository")
    return folder


def resolve_config(model: str, base_dir: str | Path | None = None, *, download: bool = True) -> Path | None:
    """config.json of a hub id: from the HF cache, else (``download``) fetched alone from the hub.

    Returns None for a name that is not a hub id, or when the file is not cached and ``download`` is
    False. A failed fetch is a UserError naming the id (and HF_HUB_OFFLINE when that stopped it).
    """
    if not is_repo_id(model) or local_path(model, base_dir).exists():
        return None
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        hit = try_to_load_from_cache(model, "config.json", cache_dir=hub_cache_dir())
    except ValueError:  # not a valid repo id after all
        return None
    if isinstance(hit, str) and Path(hit).is_file():
        return Path(hit)
    if not download:
        return None
    if offline():
        raise _offline_error(model, "its config.json is not")
    try:
        return Path(hf_hub_download(model, "config.json", cache_dir=hub_cache_dir()))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise _hub_error(model, exc) from None
