"""Re-inspecting a trained checkpoint: Phase 1's prompts, sampled again from what the policy became.

``finetune inspect sample RUN --model CHECKPOINT [--name NAME]`` re-samples the very prompts of
Phase 1 (``samples.jsonl``: same prompts, same sample ids, same columns) with the generation
settings Phase 1 recorded (``sample_info.json``; the spec's when Phase 1 was imported) from a
trained checkpoint (a transformers save, or a hub id resolved by :mod:`finetune.hub`), into a sample
set of its own: ``RUN/inspect/checkpoints/<NAME>/``. Phase 1's files are never written.
``--import FILE --name NAME`` makes a set from completions sampled elsewhere (the checkpoint on a GPU
machine from Phase 1's ``requests/``, or a mid-run inspection file), validated line by line.

A set folder is a run directory for the Phase 1 verbs: ``finetune inspect score|review|verdict|
confirm|ack|gate SET`` work on it unchanged, with the run's spec (found from the folder's place,
never from a file in it) and a copy of the run's reward files that ``score`` refreshes, so the set
always judges the reward the run trains with. Its gate adds how agreement changed against Phase 1
(:func:`compare`, also ``finetune inspect compare SET``): per reward, Phase 1 agreement vs the
checkpoint's, the disagreements that are new, and the success rates before/after.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, commit, jsonio, rundir
from finetune.errors import UserError
from finetune.hashing import reward_files, sha256_file
from finetune.rundir import SET_INFO, SETS_DIR, run_of, set_name_ok

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.inspect.gaterecord import GateRecord
    from finetune.spec import GenerationSpec, RunSpec

SAMPLE_INFO = "sample_info.json"
COMPARISON = "comparison.json"
COMPARISON_MD = "comparison.md"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
Row = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# where sets live, and telling a set folder from a run directory


def sets_dir(run_dir: Path) -> Path:
    return run_dir.joinpath(*SETS_DIR)


def set_dir(run_dir: Path, name: str) -> Path:
    return sets_dir(run_dir) / check_name(name)


def check_name(name: str) -> str:
    if not set_name_ok(name):
        raise UserError(f"set name {name!r} is not a plain folder name", where="--name",
                        fix="use letters, digits, '.', '_' and '-' (e.g. --name step-500)")
    return name


def default_name(model: str) -> str:
    """The set's folder name for a checkpoint: the folder's name, or the hub id with '/' as '--'."""
    from finetune import hub

    p = Path(model).expanduser()
    raw = model.replace("/", "--") if hub.is_repo_id(model) and not p.exists() else p.resolve().name
    return (re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.") or "checkpoint")[:100]


# ---------------------------------------------------------------------------------------------
# sampling a checkpoint


@dataclass
class Plan:
    """What to re-sample: Phase 1's prompts (one request per prompt, with Phase 1's ids) and settings."""

    requests: list[Row]
    generation: GenerationSpec
    seed: int
    settings_from: str
    phase1: dict[str, str]


def phase1_plan(run_dir: Path, spec: RunSpec) -> Plan:
    """Phase 1's prompts from samples.jsonl, grouped per prompt in file order, and its recorded settings."""
    from finetune.inspect.samplesio import load_samples

    path = run_dir / rundir.SAMPLES
    if not path.is_file():
        raise UserError(f"no Phase 1 prompts: {path} is missing", where=str(run_dir),
                        fix="run `finetune inspect sample SPEC` (Phase 1) before re-inspecting a checkpoint")
    groups: dict[Any, Row] = {}
    for s in load_samples(path, spec.dataset.prompt_column):
        req = groups.setdefault(s["row"], {"row": s["row"], "prompt": s["prompt"], "columns": s["columns"],
                                           "conversational": s["conversational"], "ids": []})
        req["ids"].append(s["id"])
    info = jsonio.read_json(run_dir / SAMPLE_INFO) if (run_dir / SAMPLE_INFO).is_file() else {}
    recorded = info.get("generation") if isinstance(info, dict) else None
    if isinstance(recorded, dict):
        generation = type(spec.generation).model_validate(recorded)
        settings_from = f"{SAMPLE_INFO} (as Phase 1 sampled)"
    else:
        generation = spec.generation
        settings_from = "the spec's generation section (Phase 1 was imported: its settings are not recorded)"
    recorded_seed = info.get("seed") if isinstance(info, dict) else None
    seed: int = recorded_seed if isinstance(recorded_seed, int) else spec.training.seed
    return Plan(list(groups.values()), generation, seed, settings_from, {rundir.SAMPLES: sha256_file(path)})


def model_folder(model: str, console: Console | None = None) -> Path:
    """The checkpoint's folder (local, HF cache or download), checked to be a loadable causal LM save."""
    from finetune import hub

    p = hub.local_path(model, None)
    if p.is_dir() and not (p / "config.json").is_file() and (p / "adapter_config.json").is_file():
        raise UserError(f"{p} is a LoRA adapter, not a model", where="--model",
                        fix="merge the adapter into its base model (peft merge_and_unload) and save that folder")
    folder = hub.resolve_model(model, None, console=console)
    weights = hub.WEIGHT_PATTERNS + hub.LEGACY_WEIGHT_PATTERNS
    if not any(any(folder.glob(pat)) for pat in weights):
        raise UserError(f"{folder} has no model weights (*.safetensors / *.bin)", where="--model",
                        fix="point --model at a saved checkpoint (trainer.save_model / save_pretrained)")
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{folder} has no tokenizer", where="--model",
                        fix="save the tokenizer with the checkpoint (tokenizer.save_pretrained(folder))")
    return folder


def _sample_rows(folder: Path, plan: Plan, device: str | None, backend: str, console: Console | None) -> tuple[
        list[Row], str, str]:
    """Generate every Phase 1 prompt's samples from the checkpoint: (rows in Phase 1's order, backend, device)."""
    import torch
    from rich.progress import Progress

    from finetune.inspect import sample as S

    g = plan.generation
    chosen = S._chosen_backend(backend, device)
    torch.manual_seed(plan.seed)
    random.seed(plan.seed)
    if chosen == "vllm":
        sampler: Any = S._VllmSampler(str(folder), plan.seed, g.max_prompt_length, g.max_completion_length)
    else:
        sampler = S._TransformersSampler(str(folder), device, g.max_prompt_length)
    by_k: dict[int, list[Row]] = {}
    for req in plan.requests:
        by_k.setdefault(len(req["ids"]), []).append(req)
    rows: list[Row] = []
    with Progress(console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task(f"sampling the checkpoint ({chosen})", total=len(plan.requests))
        for k, reqs in sorted(by_k.items()):
            rows += S._generate(sampler, reqs, k, g, g.temperature, bar, task)
    order = {sid: n for n, sid in enumerate(i for req in plan.requests for i in req["ids"])}
    for r in rows:
        r["source"] = "checkpoint"
    return sorted(rows, key=lambda r: order[r["id"]]), chosen, str(getattr(sampler, "device", "cuda"))


def sync_rewards(set_path: Path) -> list[str]:
    """Make the set's reward files byte-identical to its run's, in one commit; return the names that changed.

    One commit (:func:`finetune.commit.commit_files`): a kill while copying leaves the set's old reward files
    or the run's, never some of each, so the set is never scored against half-copied rewards."""
    run = run_of(set_path)
    if run is None:
        raise UserError(f"{set_path} is not a checkpoint sample set", where=str(set_path),
                        fix="run `finetune inspect sample RUN --model CHECKPOINT` first")
    files, remove = _reward_changes(run, set_path)
    if files or remove:
        commit.commit_files(set_path, files, remove=remove)
    return [*files, *remove]


def _reward_changes(run: Path, target: Path) -> tuple[dict[str, bytes], tuple[str, ...]]:
    """(reward files of ``run`` whose bytes ``target`` lacks, reward files of ``target`` the run no longer has)."""
    source = {p.name: p for p in reward_files(run)}
    if rundir.REWARDS not in source:
        raise UserError(f"no {rundir.REWARDS} in {run}", where=str(run), fix="run `finetune rewards render SPEC` first")
    files: dict[str, bytes] = {}
    for name, p in source.items():
        data = p.read_bytes()
        if not (target / name).is_file() or (target / name).read_bytes() != data:
            files[name] = data
    return files, tuple(old.name for old in reward_files(target) if old.name not in source)


def _copy_rewards(run: Path, stage: Path) -> None:
    """The run's reward files into a set's (empty, hidden) stage folder."""
    files, _ = _reward_changes(run, stage)
    for name, data in files.items():
        atomic.write_bytes(stage / name, data)


def reward_drift(set_path: Path) -> list[str]:
    """Reward files that differ between the set and its run (the set must judge the run's reward)."""
    run = run_of(set_path)
    if run is None:
        return []
    mine = {p.name: sha256_file(p) for p in reward_files(set_path)}
    theirs = {p.name: sha256_file(p) for p in reward_files(run)}
    return sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))


def _write_set(run_dir: Path, target: Path, rows: list[Row], info: Row, record: Row) -> None:
    """The set folder, whole or not at all; an older set of that name is replaced whole (its verdicts
    judged other completions)."""
    with commit.staged_dir(target, keep=lambda _name: False) as stage:
        jsonio.write_jsonl(stage / rundir.SAMPLES, rows)
        jsonio.write_json(stage / SAMPLE_INFO, info)
        _copy_rewards(run_dir, stage)
        jsonio.write_json(stage / SET_INFO, record)


def import_set(spec: RunSpec, run_dir: Path, source: str, name: str, model: str | None = None) -> Row:
    """Completions sampled elsewhere (a checkpoint on the GPU machine with Phase 1's requests, or a
    mid-run inspection file) into ``RUN/inspect/checkpoints/<name>/``; every line validated first."""
    from finetune.inspect.sample import _load_import
    from finetune.rewards.columns import check_samples

    target = set_dir(run_dir, name)
    if not (run_dir / rundir.REWARDS).is_file():
        raise UserError(f"no {rundir.REWARDS} in {run_dir}", where=str(run_dir),
                        fix="run `finetune rewards render SPEC` first")
    rows, imported = _load_import(source, spec.dataset.prompt_column)
    check_samples(spec, rows, imported["file"])
    phase1_path = run_dir / rundir.SAMPLES
    phase1 = {rundir.SAMPLES: sha256_file(phase1_path)} if phase1_path.is_file() else {}
    same = phase1_path.is_file() and _prompt_keys(rows) == _prompt_keys(
        jsonio.read_jsonl(phase1_path), from_file=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    info = {"time": stamp, "imported": imported, "samples": len(rows), "model": model, "base_success": None,
            "same_prompts_as_phase1": same, "truncated": sum(bool(r.get("truncated")) for r in rows)}
    record = {"name": target.name, "model": model, "imported": imported, "phase1": phase1,
              "same_prompts_as_phase1": same, "time": stamp}
    _write_set(run_dir, target, rows, info, record)
    return {**info, "dir": str(target), "name": target.name}


def _prompt_keys(rows: list[Any], from_file: bool = False) -> list[tuple[str, str]]:
    """(id, prompt) per sample: whether a set holds Phase 1's very prompts under Phase 1's ids."""
    items = [obj for _, obj in rows] if from_file else rows
    return sorted((str(r.get("id")), json.dumps(r.get("prompt"), sort_keys=True)) for r in items
                  if isinstance(r, dict))


def sample_checkpoint(spec: RunSpec, run_dir: Path, model: str, *, name: str | None = None,
                      device: str | None = None, backend: str = "auto", console: Console | None = None) -> Row:
    """Re-sample Phase 1's prompts from ``model`` into ``RUN/inspect/checkpoints/<name>/`` (replaced whole).

    Everything that can be refused (no Phase 1 samples, no rewards.py, a folder that is not a model,
    a bad name) is refused before anything is written."""
    target = set_dir(run_dir, name or default_name(model))
    plan = phase1_plan(run_dir, spec)
    if not (run_dir / rundir.REWARDS).is_file():
        raise UserError(f"no {rundir.REWARDS} in {run_dir}", where=str(run_dir),
                        fix="run `finetune rewards render SPEC` first")
    folder = model_folder(model, console)
    rows, chosen, device_used = _sample_rows(folder, plan, device, backend, console)
    info = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seed": plan.seed,
            "model": str(folder), "model_arg": model, "backend": chosen, "device": device_used,
            "generation": plan.generation.model_dump(), "settings_from": plan.settings_from, "base_success": None,
            "prompts": [r["row"] for r in plan.requests], "samples": len(rows),
            "truncated": sum(bool(r.get("truncated")) for r in rows)}
    record = {"name": target.name, "model": model, "model_folder": str(folder), "phase1": plan.phase1,
              "settings_from": plan.settings_from, "time": info["time"]}
    _write_set(run_dir, target, rows, info, record)
    return {**info, "dir": str(target), "name": target.name}


# ---------------------------------------------------------------------------------------------
# how agreement changed: Phase 1 vs the checkpoint set


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _reward_side(name: str, rows: list[Row], disagreements: list[Row], n_read: int) -> Row:
    """One reward on one sample set: agreement with the reading, and how often it passes."""
    mine = [d for d in disagreements if name in d["rewards"]]
    against = {d["id"] for d in mine}
    scores = [v for row in rows if isinstance(v := row["rewards"].get(name), (int, float))]
    return {"read": n_read, "agreed": n_read - len(against), "agreement": _share(n_read - len(against), n_read),
            "false_positive": sorted({d["id"] for d in mine if d["kind"] == "false_positive"}),
            "false_negative": sorted({d["id"] for d in mine if d["kind"] == "false_negative"}),
            "success_rate": _share(sum(bool(row["passes"].get(name)) for row in rows), len(rows)),
            "mean": sum(scores) / len(scores) if scores else None}


def _gate_status(run_dir: Path, spec: RunSpec, phase1: bool, record: GateRecord | None = None) -> str:
    """Phase 1's gate as it holds now; a set's as its gate record says (``record``: the one being written)."""
    from finetune.inspect import gate
    from finetune.inspect.gaterecord import load_record

    if record is not None:
        return record.status
    if phase1:
        check = gate.verify_gate(run_dir, spec)
        return "PASS (holds)" if check.ok else f"not PASS: {check.reason}"
    path = run_dir / rundir.GATE
    if not path.is_file():
        return "not run"
    try:
        return load_record(path).status
    except UserError as exc:
        return f"unreadable: {exc.what}"


def side(run_dir: Path, spec: RunSpec, phase1: bool, gate_record: GateRecord | None = None) -> Row:
    """A sample set's reading against its scores: counts, per-reward agreement and success, disagreements."""
    from finetune.inspect.gate import verdicts_against
    from finetune.inspect.score import load_report, load_scored, report_metas

    rows = load_scored(run_dir)
    metas = report_metas(load_report(run_dir), run_dir)
    by_id = {r["id"]: r for r in rows}
    r = verdicts_against(run_dir, by_id, metas)
    for d in r.disagreements:
        row = by_id[d["id"]]
        d["why"] = {n: (row.get("why") or {}).get(n) for n in d["rewards"]}
        d["completion"] = row["completion"][:200]
    return {"dir": str(run_dir), "gate": _gate_status(run_dir, spec, phase1, gate_record), "scored": len(rows),
            "read": len(r.read), "success_rate": _share(sum(bool(row["success"]) for row in rows), len(rows)),
            "rewards": {m.name: {"role": m.role, **_reward_side(m.name, rows, r.disagreements, len(r.read))}
                        for m in metas},
            "disagreements": r.disagreements}


def _keys(d: Row) -> set[tuple[str, str, str]]:
    return {(d["kind"], d["field"], name) for name in d["rewards"]}


def compare(set_path: Path, spec: RunSpec, gate_record: GateRecord | None = None) -> Row:
    """Phase 1 (the run directory) against checkpoint set ``set_path``: per reward, agreement and success
    before/after, and the set's disagreements of a kind (false positive / negative, verdict field,
    reward) Phase 1's reading never showed. ``gate_record``: the set's gate record about to be committed
    with the comparison (else its gate.json is read)."""
    run = run_of(set_path)
    if run is None:
        raise UserError(f"{set_path} is not a checkpoint sample set", where=str(set_path),
                        fix="give RUN/inspect/checkpoints/NAME (made by `finetune inspect sample RUN --model CKPT`)")
    before, after = side(run, spec, phase1=True), side(set_path, spec, phase1=False, gate_record=gate_record)
    seen = {k for d in before["disagreements"] for k in _keys(d)}
    new = [d for d in after["disagreements"] if _keys(d) - seen]
    rewards = []
    for name, a in after["rewards"].items():
        b = before["rewards"].get(name, {})
        rewards.append({"name": name, "role": a["role"],
                        **{f"{k}_phase1": b.get(k) for k in ("agreement", "success_rate", "mean")},
                        **{f"{k}_checkpoint": a.get(k) for k in ("agreement", "success_rate", "mean")},
                        "new_false_positive": sorted({d["id"] for d in new if name in d["rewards"]
                                                     and d["kind"] == "false_positive"}),
                        "new_false_negative": sorted({d["id"] for d in new if name in d["rewards"]
                                                      and d["kind"] == "false_negative"})})
    info = jsonio.read_json(set_path / SET_INFO)
    return {"set": set_path.name, "model": info.get("model") if isinstance(info, dict) else None,
            "phase1": before, "checkpoint": after, "rewards": rewards, "new_disagreements": new,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def comparison_lines(c: Row) -> list[str]:
    """The comparison as Markdown lines (also what the terminal prints)."""
    b, a = c["phase1"], c["checkpoint"]
    lines = [f"# Checkpoint `{c['set']}` against Phase 1", "",
             f"- checkpoint: `{c['model']}`",
             (f"- Phase 1: {b['read']} of {b['scored']} samples read, gate {b['gate']}, "
              f"success {_pct(b['success_rate'])}"),
             (f"- checkpoint: {a['read']} of {a['scored']} samples read, gate {a['gate']}, "
             f"success {_pct(a['success_rate'])}"), "",
             ("| reward | role | agreement Phase 1 → checkpoint | success Phase 1 → checkpoint | mean score | "
             "new disagreements |"), "|---|---|---|---|---|---|"]
    for r in c["rewards"]:
        new = len(r["new_false_positive"]) + len(r["new_false_negative"])
        lines.append(f"| {r['name']} | {r['role']} | {_pct(r['agreement_phase1'])} → {_pct(r['agreement_checkpoint'])} "
                     f"| {_pct(r['success_rate_phase1'])} → {_pct(r['success_rate_checkpoint'])} "
                     f"| {_num(r['mean_phase1'])} → {_num(r['mean_checkpoint'])} | {new} |")
    news = c["new_disagreements"]
    lines += ["", f"## Disagreements Phase 1 never showed ({len(news)} on {len({d['id'] for d in news})} sample(s))",
              "", "Of a kind (false positive / negative, verdict field, reward) Phase 1's reading never had.", ""]
    if not news:
        lines.append("None: every disagreement on the checkpoint's samples (if any) is of a kind Phase 1's "
                     "reading already had.")
    for d in news:
        kind = ("false positive (reward-hacking risk)" if d["kind"] == "false_positive"
                else "false negative (lost signal)")
        whys = ", ".join(f"{n}: {w}" for n, w in d["why"].items() if w)
        lines.append(f"- `{d['id']}`: {kind} on {d['field']} — {', '.join(d['rewards'])} {d['scores']}"
                     + (f" (why: {whys})" if whys else "") + (f" — reader: {d['note']}" if d["note"] else "")
                     + f" — completion: {d['completion']!r}")
    return lines


def comparison_files(set_path: Path, c: Row) -> dict[str, str]:
    """The comparison's two files (comparison.json + comparison.md), for one commit."""
    return {COMPARISON: jsonio.json_text(set_path / COMPARISON, c),
            COMPARISON_MD: "\n".join(comparison_lines(c)) + "\n"}


def write_comparison(set_path: Path, spec: RunSpec) -> Row:
    """compare() written beside the set's gate record (comparison.json + comparison.md, switched at once);
    refused, nothing written, when gate.json changed while comparing (an `inspect gate SET` committed its own
    pair meanwhile: this comparison would state the older gate)."""
    gate_path = set_path / rundir.GATE
    seen = gate_path.read_bytes() if gate_path.is_file() else None
    c = compare(set_path, spec)
    atomic.crash_point("comparison:computed")  # tests only: the moment between comparing and the commit

    def gate_unchanged() -> None:
        if (gate_path.read_bytes() if gate_path.is_file() else None) != seen:
            raise UserError(f"{rundir.GATE} changed while comparing; nothing written", where=str(set_path),
                            fix=f"run `finetune inspect compare {set_path}` again")

    commit.commit_files(set_path, comparison_files(set_path, c), check=gate_unchanged)
    return c


@dataclass
class SetGate:
    """``inspect gate`` on a set: its gate record, and the comparison committed with it (or why there is none)."""

    record: GateRecord
    comparison: Row | None = None
    error: UserError | None = None


def gate_set(set_path: Path, spec: RunSpec, extra_reasons: list[str]) -> SetGate:
    """The set's gate and its comparison with Phase 1 as ONE commit (gate.json, comparison.json, .md): after a
    kill they are both old or both new, never a comparison stating another gate. When the comparison cannot
    be made, the old one is removed in that commit (it would state the old gate)."""
    from finetune.inspect import gate

    made: dict[str, Any] = {"comparison": None, "error": None}

    def companions(record: GateRecord) -> tuple[dict[str, str], tuple[str, ...]]:
        try:
            made["comparison"] = compare(set_path, spec, gate_record=record)
        except UserError as exc:  # the gate's verdict stands; only the comparison is missing
            made["comparison"], made["error"] = None, exc
            return {}, (COMPARISON, COMPARISON_MD)
        return comparison_files(set_path, made["comparison"]), ()

    record = gate.run_gate(set_path, spec, extra_reasons=extra_reasons, companions=companions)
    return SetGate(record, made["comparison"], made["error"])
