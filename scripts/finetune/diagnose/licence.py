"""Whether a diagnosis may license a config change (a variant, lr / beta away from the base recipe).

A diagnosis licenses only from this run's own training: the log it read is the run's ``train/`` log as its
train.py wrote it, and that train.py is the config the run trained under (train.py records its own digest in
``train/provenance.json`` when training starts; the diagnosis records it beside the digest of config/train.py then,
and the digest of the log it read). Any other log — a JSONL the agent wrote, another run's logs, logs from a config
rendered since — licenses nothing, unless the person approves it with their own command (``finetune diagnose RUN
--approve``, which the plugin's hook refuses to the agent): the approval is signed with the person's key over what
it licenses. ``config render`` asks :func:`holds` before it takes a symptom or a healthy verdict as a licence.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import rundir
from finetune.hashing import sha256_file

if TYPE_CHECKING:
    from finetune.spec import RunSpec

PROVENANCE = "provenance.json"  # in train/: written by the rendered train.py when training starts


def uses_licence(spec: RunSpec, is_moe: bool) -> bool:
    """Does a render of ``spec`` rest on a diagnosis's licence (a variant other than the MoE's GSPO, or lr / beta
    away from the base recipe)? Then the diagnosis is among the person's acts the render binds."""
    import math

    from finetune.spec import BASE_BETA, BASE_LEARNING_RATE

    variant = spec.variant != "grpo" and not (spec.variant == "gspo" and is_moe)
    moved = not math.isclose(spec.training.learning_rate, BASE_LEARNING_RATE, rel_tol=1e-9) or (
        spec.variant == "grpo" and not math.isclose(spec.training.beta, BASE_BETA, rel_tol=1e-9))
    return variant or moved


def provenance(log: Path, run_dir: Path) -> dict[str, Any]:
    """Where the log a diagnosis read comes from (recorded in diagnosis.json's ``run.provenance``)."""
    from finetune import jsonio

    log, train = log.resolve(), (run_dir / rundir.TRAIN_DIR).resolve()
    own = log.is_relative_to(train)
    written: Any = None
    marker = train / PROVENANCE
    if own and marker.is_file():
        try:
            written = jsonio.read_json(marker)
        except Exception:  # noqa: BLE001 - an unreadable marker is no provenance (recorded as such)
            written = None
    trained_under = written.get("train_py_sha256") if isinstance(written, dict) else None
    config = run_dir / rundir.CONFIG_DIR / "train.py"
    config_now = sha256_file(config) if config.is_file() else None
    return {"log": str(log), "log_sha256": sha256_file(log), "own_training": own,
            "trained_under": trained_under if isinstance(trained_under, str) else None,
            "config_sha256": config_now,
            "bound": bool(own and trained_under and trained_under == config_now)}


def licensed_payload(doc: dict[str, Any]) -> dict[str, Any]:
    """What a person's approval of a diagnosis covers: its verdict, symptoms, recommended change and the log."""
    run = doc.get("run") or {}
    return {"verdict": doc.get("verdict"), "symptoms": [s.get("name") for s in doc.get("symptoms") or []
                                                         if isinstance(s, dict)],
            "recommended_variant": doc.get("recommended_variant"), "recommended_change": doc.get("recommended_change"),
            "log": (run.get("provenance") or {}).get("log"), "log_sha256": (run.get("provenance") or {}).get(
                "log_sha256")}


def approve(doc: dict[str, Any], by: str) -> dict[str, Any]:
    """``doc`` with the person's approval (signed with the person's key): it now licenses what it names."""
    from finetune.inspect import personkey
    from finetune.inspect.verdicts import now

    approval = {"by": by, "time": now(), "covers": licensed_payload(doc)}
    return {**doc, "approval": {**approval, "sig": personkey.sign("licence", approval)}}


def holds(doc: dict[str, Any] | None, run_dir: Path) -> tuple[bool, str]:
    """(licenses?, why): from this run's own training bound to its config, or the person's signed approval."""
    from finetune.inspect import personkey

    if doc is None:
        return False, "no diagnosis"
    approval = doc.get("approval")
    if isinstance(approval, dict):
        signed = {k: approval.get(k) for k in ("by", "time", "covers")}
        if personkey.verify("licence", signed, approval.get("sig")) and approval.get("covers") == licensed_payload(
                doc):
            return True, f"approved by {approval.get('by')} (signed)"
        return False, "its approval is not the person's signature over this diagnosis"
    found = (doc.get("run") or {}).get("provenance")
    if not isinstance(found, dict):
        return False, "it records no provenance for the log it read (re-run `finetune diagnose` on the run)"
    if not found.get("own_training"):
        return False, (f"it read {found.get('log')}, not this run's own train/ log: a log the agent or another run "
                       "wrote licenses nothing unless the person approves it (`finetune diagnose RUN --approve`)")
    if not found.get("bound"):
        return False, ("the train/ log it read is not bound to the config it trained under (train/provenance.json "
                       "missing, or config/train.py changed since training); re-train with the rendered config, or "
                       "the person approves it")
    log = Path(str(found.get("log")))
    if not log.is_file() or sha256_file(log) != found.get("log_sha256"):
        return False, f"{log} changed since it was diagnosed; re-run `finetune diagnose`"
    return True, "it read this run's own training log, bound to the config it trained under"
