"""The person's key: a secret outside every project and run folder that only the person's commands sign with.

A person's act — their verdicts (``inspect human-verdict``, the terminal review), their confirmation of an agent's
reading (``inspect confirm``), their acknowledgement of a red flag (``inspect ack``), their approval of a licence
(``diagnose --approve``) — is recorded with an HMAC-SHA256 of what it records under this key. The gate counts a
verdict, a confirmation or an acknowledgement as the person's only when that signature checks, so ``via:
human-verdict`` is a checked signature, not a field anyone can write.

The key lives in ``$XDG_CONFIG_HOME/llm-finetuning/person.key`` (``~/.config/llm-finetuning/`` by default): the
folder 0700, the file 0600, 32 random bytes as hex, created by the first person's command that signs (no
pre-approved command ever creates or reads it for signing; verifying reads it). The plugin's PreToolUse hook
(hooks/guard.py) denies the agent's tools every access to that folder, and denies the agent's Bash every person's
command and every setting of ``XDG_CONFIG_HOME`` / ``HOME``. What no same-uid tool can prevent: a general shell the
person approves can read the key and sign; the boundary is DESIGN.md's person's-act contract.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from finetune.errors import UserError
from finetune.hashing import canonical_json

DIRNAME = "llm-finetuning"
KEY_FILE = "person.key"
KINDS = ("verdict", "confirmation", "ack", "licence")  # what a signature is of (its domain tag)


def folder() -> Path:
    """The person's folder: ``$XDG_CONFIG_HOME/llm-finetuning`` (``~/.config/llm-finetuning`` without it)."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".config") / DIRNAME


def key_path() -> Path:
    return folder() / KEY_FILE


def _check_private(path: Path) -> None:
    """A key others can read or replace is no key: refuse a link, another owner, or any group / other bit."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise UserError("the person's key is not a plain file", where=str(path),
                        fix="remove it; the person's next command (inspect confirm / ack / human-verdict) makes one")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise UserError(f"the person's key is readable or writable by others (mode {info.st_mode & 0o777:o})",
                        where=str(path), fix=f"chmod 600 {path} (and 700 its folder), or remove it to make a new one")


def _read(path: Path) -> bytes | None:
    if not os.path.lexists(path):
        return None
    _check_private(path)
    text = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 32:
        raise UserError("the person's key is not 32 bytes of hex", where=str(path),
                        fix="remove it; the person's next command makes a new one (earlier signatures then fail)")
    return key


def _create(path: Path) -> bytes:
    """A new key, written whole under a private name and then linked into place: a concurrent command sees no
    key or the whole key, never a half-written one; if another made it first, that one is the key."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    key = secrets.token_bytes(32)
    staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(key.hex() + "\n")
    try:
        os.link(staged, path)
    except FileExistsError:
        made = _read(path)
        assert made is not None
        return made
    finally:
        os.unlink(staged)
    return key


def _mac(key: bytes, kind: str, payload: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown signature kind {kind!r}")
    return hmac.new(key, kind.encode("ascii") + b"\n" + canonical_json(payload), hashlib.sha256).hexdigest()


def sign(kind: str, payload: Any) -> str:
    """The signature of ``payload`` (JSON-able) as a ``kind`` — for the person's commands only (makes the key)."""
    path = key_path()
    key = _read(path) or _create(path)
    return _mac(key, kind, payload)


def verify(kind: str, payload: Any, signature: str | None) -> bool:
    """Does ``signature`` sign ``payload`` as a ``kind`` under this person's key? (no key, no signature: False)"""
    if not signature:
        return False
    key = _read(key_path())
    return key is not None and hmac.compare_digest(_mac(key, kind, payload).encode(), signature.encode("utf-8"))


SETTINGS_FILE = "settings.json"  # the person's plugin settings (userConfig), kept here by the plugin's guard
SETTINGS = {"judge_hosts": "FINETUNE_JUDGE_HOSTS", "judge_key_envs": "FINETUNE_JUDGE_KEY_ENVS",
            "judge_proxy": "FINETUNE_JUDGE_PROXY"}  # setting → the environment variable the person may set instead


def person_setting(name: str) -> list[str]:
    """One of the person's :data:`SETTINGS` as a list: the plugin's userConfig (which its guard writes to
    ``settings.json`` in the person's folder, where the agent's tools cannot write) and the environment variable of
    the person's own shell (comma-separated; the guard refuses it on an agent's command line), together."""
    import json

    values = [v.strip() for v in os.environ.get(SETTINGS[name], "").split(",") if v.strip()]
    try:
        data = json.loads((folder() / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    kept = data.get(name) if isinstance(data, dict) else None
    listed = kept if isinstance(kept, list) else [kept] if isinstance(kept, str) else []
    values += [v.strip() for item in listed if isinstance(item, str) for v in item.split(",") if v.strip()]
    return list(dict.fromkeys(values))
