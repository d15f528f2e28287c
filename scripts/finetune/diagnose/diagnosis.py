"""`finetune diagnose RUN`: read a GRPO run's logs, name its symptoms, pick at most one change.

The seed's rule: train plain GRPO first and switch to a variant only when its failure mode shows —
entropy collapse / degenerate long CoT → DAPO, reward or length rising regardless of quality →
Dr.GRPO, a mixture-of-experts model → GSPO (required, not optional). Never pre-emptively.

RUN is a TRL output directory (trainer_state.json; else the live ``metrics.jsonl`` the rendered
train.py appends at every logged step; else its newest checkpoint-*/), a run directory (its ``train/``
is the output directory), a ``trainer_state.json``, or a JSONL file of logged dicts.
Every symptom carries its evidence (steps, values, trend statistics) so a reader can check it; the
thresholds are named and explained in :mod:`finetune.diagnose.detectors`.

Writes ``DIR/diagnosis/{diagnosis.json, report.md, curves.png}`` together (all or nothing);
:mod:`finetune.diagnose.apply` sets the recommended variant in the run spec.

diagnosis.json: ``verdict`` (``healthy`` | ``symptom`` | ``insufficient``), ``symptoms`` (each with ``summary``,
``evidence`` and, when it spans steps, ``window``; names and priority from ``detectors.DETECTORS``),
``recommended_variant`` (``variants.VARIANT_SYMPTOM`` only; else the run's current variant) and
``recommended_change`` (null when healthy / insufficient; else ``kind`` ``variant`` | ``health`` | ``reward``,
``addresses``, ``kwargs`` ``{name: {from, to}}``; ``reward``, for ``reward_hacking``, which outranks every variant
symptom, sends the named reward back to Phase 1), ``headline``, ``checks`` (every detector), ``caveats``, ``run``
(log, config source, reward roles, ``stopped``, ``provenance``), ``licence`` and ``thresholds``. Reward roles come
from the spec's RewardMeta, else rewards.py's ``REWARD_META``, else ``--correctness``, else the logged names
(``ROLE_STEMS``; printed as ``assumed_roles``). Re-diagnosing a run already on a variant keeps the evidence that
licensed it as ``variant_licence``, which config render accepts in place of a symptom named by the new diagnosis.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from finetune import __version__, jsonio, rundir, status
from finetune.diagnose.context import RunContext, assumed_roles, load_context
from finetune.diagnose.detectors import detector, priority, remedy_text, run_all, thresholds
from finetune.diagnose.evidence import Finding, Run, rounded
from finetune.diagnose.licence import approve as approve_licence
from finetune.diagnose.licence import holds, provenance
from finetune.diagnose.logs import STANDING_CAVEAT, Logs, load_logs
from finetune.diagnose.recommend import current_variant, decide, headline, mark_held
from finetune.diagnose.report import write_outputs
from finetune.diagnose.trackiodb import NOT_A_LICENCE, is_db
from finetune.errors import UserError
from finetune.variants import VARIANT_SYMPTOM


def diagnose(run: str | Path, *, spec: str | Path | None = None, model: str | None = None,
             correctness: list[str] | None = None, trackio_run: str | None = None
             ) -> tuple[dict[str, Any], Logs, RunContext, list[Finding]]:
    """Read RUN's logs and context, run every detector, and return the diagnosis document."""
    run = Path(run)
    logs = load_logs(run, trackio_run)
    logged = {k.split("/")[1] for k in logs.series if k.startswith("rewards/") and k.endswith("/mean")}
    ctx = load_context(run, logs.source, Path(spec) if spec else None, model, correctness, logged or None)
    subject = Run(logs, ctx)
    findings = run_all(subject)
    return diagnosis_document(subject, findings), logs, ctx, findings


def diagnosis_document(run: Run, findings: list[Finding]) -> dict[str, Any]:
    """diagnosis.json: the verdict, the symptoms with their evidence, the one change, every check and caveat."""
    logs, ctx = run.logs, run.ctx
    current = current_variant(ctx.config, ctx.spec)
    state, variant, change, co_rise = decide(run, findings, current)
    caveats = run.caveats + ([co_rise["caveat"]] if co_rise is not None else [])
    caveats += [NOT_A_LICENCE] if trackio_log(logs) else []
    return {
        "verdict": state,
        "headline": headline(state, variant, change, current, co_rise, len(logs.entries)),
        "symptoms": [mark_held(f.symptom(), change) for f in findings if f.status == "symptom"],
        "recommended_variant": variant,
        "recommended_change": rounded(change, 6) if change else None,
        "checks": [{"name": f.name, "status": f.status, "why": f.why, "priority": priority(f.name),
                    "remedy": remedy_text(f.name), "detects": detector(f.name).doc} for f in findings],
        "caveats": list(dict.fromkeys(caveats)) + [STANDING_CAVEAT],
        "assumed_roles": assumed_roles(ctx),
        "run": {
            "log": str(logs.source), "logged_steps": len(logs.entries),
            "first_step": logs.steps[0], "last_step": logs.steps[-1], "run_dir": str(ctx.run_dir),
            "spec": str(ctx.spec_path) if ctx.spec_path else None, "config_source": ctx.config_source,
            "reward_roles": ctx.roles, "reward_roles_source": ctx.roles_source,
            "correctness_keys": run.correctness_keys(), "model": ctx.model_source,
            "current_variant": current, "stopped": stopped_by_inspection(ctx.run_dir),
            # a Trackio project's database is reported, never a licence for a config change (the run's own logs are)
            "log_kind": "trackio" if trackio_log(logs) else "training log", "licenses": not trackio_log(logs),
            "provenance": tracked_provenance(logs, ctx.run_dir),  # licenses only from the run's own training
        },
        "thresholds": thresholds(),
        "plugin_version": __version__,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def trackio_log(logs: Logs) -> bool:
    return is_db(logs.source)


def tracked_provenance(logs: Logs, run_dir: Path) -> dict[str, Any]:
    """The log's provenance; a Trackio database (even the one under train/trackio/) is a tracker's copy of the run,
    never its own training log, so only the person's approval makes it license anything."""
    found = provenance(logs.source, run_dir)
    return {**found, "own_training": False, "bound": False} if trackio_log(logs) else found


def stopped_by_inspection(run_dir: Path) -> dict[str, Any] | None:
    """train/STOPPED.json when train.py's inspection callback stopped the run (rule, step, reward), else None.

    Read by the one reader ``finetune status`` uses (:func:`finetune.status.read_stop`), so a file that
    does not parse, is not an object or names no rule carries the same ``problem`` line in both."""
    stop = status.read_stop(run_dir)
    if stop is None:
        return None
    return {"file": str(run_dir / stop.file), "rule": stop.rule, "step": stop.step, "reward": stop.reward,
            "message": stop.message, "inspection_file": stop.inspection_file, "problem": stop.problem}


def carried_variant_licence(doc: dict[str, Any], previous_path: Path) -> dict[str, Any] | None:
    """Keep the evidence that licensed the run's current variant when its diagnosis is rewritten.

    A run already on DAPO / Dr.GRPO / GSPO is usually healthy on re-diagnosis (the variant fixed the
    symptom), so the new diagnosis.json no longer names the symptom that licensed it. Without carrying
    the licence forward, re-rendering that run's spec would be refused (a variant needs the diagnosis
    of its symptom). The licence keeps the original evidence, so it is still a diagnosis that names the
    symptom, never a pre-emptive switch.
    """
    current = doc["run"].get("current_variant")
    if current not in VARIANT_SYMPTOM:
        return None
    symptom = VARIANT_SYMPTOM[current]
    if any(s.get("name") == symptom for s in doc["symptoms"]):
        return None  # this diagnosis itself names the symptom
    try:
        previous = jsonio.loads(previous_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict):
        return None
    carried = previous.get("variant_licence")
    if (isinstance(carried, dict) and carried.get("variant") == current and carried.get("symptom") == symptom
            and carried.get("licensed") is True):
        return carried
    licence = previous.get("licence")
    if not (isinstance(licence, dict) and licence.get("holds") is True):
        return None  # a diagnosis that licensed nothing when it was written carries nothing forward
    for s in previous.get("symptoms") or []:
        if isinstance(s, dict) and s.get("name") == symptom:
            return {"variant": current, "symptom": symptom, "evidence": s, "licensed": True,
                    "diagnosed": {"time": previous.get("time"), "log": (previous.get("run") or {}).get("log"),
                                  "licence": licence.get("why")}}
    return None


def diagnose_and_write(run: str | Path, *, out: str | Path | None = None, spec: str | Path | None = None,
                       model: str | None = None, correctness: list[str] | None = None,
                       for_apply: bool = False, approve: Callable[[dict[str, Any]], str] | None = None,
                       trackio_run: str | None = None,
                       ) -> tuple[dict[str, Any], Path, RunContext]:
    """Diagnose RUN and write OUT/diagnosis/ (default: the run directory), carrying the licence of the run's
    current variant forward. ``for_apply``: the diagnosis must land in the run directory (the renderer reads
    it there). ``approve(doc)``: the person's command shows the diagnosis and returns their name (or refuses);
    the diagnosis then carries their signed approval. Whether it licenses a change is recorded as ``licence``
    (:func:`finetune.diagnose.licence.holds`). Returns the diagnosis document, the folder written and the run's
    context."""
    doc, logs, ctx, _ = diagnose(run, spec=spec, model=model, correctness=correctness, trackio_run=trackio_run)
    if approve is not None:
        doc = approve_licence(doc, approve(doc))
    out_dir = Path(out) if out else ctx.run_dir
    if for_apply and out_dir.resolve() != ctx.run_dir.resolve():
        raise UserError("--apply writes the run's spec and config/, but -o sends the diagnosis elsewhere",
                        where="-o", fix="drop -o when using --apply (the renderer reads the run directory)")
    series = Run(logs, ctx).correctness_series()
    carried = carried_variant_licence(doc, out_dir / rundir.DIAGNOSIS)
    if carried:
        doc["variant_licence"] = carried
    ok, why = holds(doc, ctx.run_dir)
    doc["licence"] = {"holds": ok, "why": why}
    return doc, write_outputs(out_dir, doc, logs, series), ctx
