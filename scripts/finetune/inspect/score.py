"""``finetune inspect score RUN``: run rewards.py on every sample, then flags, probes, base success.

Writes scored.jsonl (one row per sample with each reward's score, error, pass) and
score_report.json (per-reward statistics, the base-success report, red flags, hack probes, and the
hashes of what was scored so the gate can tell a stale report).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Callable
from math import comb
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, commit, jsonio, rundir
from finetune.errors import UserError
from finetune.hashing import reward_files, reward_section_digest, sha256_file
from finetune.inspect import flags as flags_mod
from finetune.inspect import probes as probes_mod
from finetune.inspect import runfiles
from finetune.inspect.rewardmod import RewardModule, load_rewards
from finetune.inspect.samplesio import load_samples
from finetune.inspect.verdicts import load_json
from finetune.rewards.kind import reading_of
from finetune.rewards.lib.rewards_meta import RewardMeta

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.inspect.isolate import Channel
    from finetune.spec import RunSpec

NEVER = 0.0  # mean base success at/below which RL has nothing to sharpen
SATURATED_SHARE = 0.9  # share of prompts solved k/k at/above which there is nothing left to learn


def scored_inputs(run_dir: Path, spec: RunSpec) -> dict[str, str]:
    """Hashes of what a score report was computed from (rewards, spec rewards, samples)."""
    out = {p.name: sha256_file(p) for p in reward_files(run_dir)}
    out["spec:rewards"] = reward_section_digest(spec.reward_section())
    for name in (rundir.SAMPLES, rundir.BASE_SAMPLES):
        if (run_dir / name).is_file():
            out[name] = sha256_file(run_dir / name)
    return out


def report_is_current(run_dir: Path, spec: RunSpec, report: dict[str, Any]) -> str:
    """'' when the report matches the files now; otherwise what changed."""
    unsettled = commit.pending(run_dir)
    if unsettled:  # a killed commit's files are half switched: the next finetune command finishes it
        return (f"an interrupted write of {', '.join(unsettled)} is unfinished "
                "(any finetune command on the run finishes it)")
    now = scored_inputs(run_dir, spec)
    then = report.get("inputs", {})
    changed = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    if (run_dir / rundir.SCORED).is_file() and sha256_file(run_dir / rundir.SCORED) != report.get("scored_sha256"):
        changed.append(rundir.SCORED)
    return ", ".join(f"{c} changed" for c in changed)


def load_report(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / rundir.SCORE_REPORT
    report = load_json(path)
    if report is None:
        raise UserError(f"no valid {rundir.SCORE_REPORT} in {run_dir}", fix="run `finetune inspect score RUN` first")
    return runfiles.check_report(report, path)  # the shape readers index, or one line naming the file


def report_metas(report: dict[str, Any], run_dir: Path) -> list[RewardMeta]:
    """The RewardMeta of each reward in a score report (its ``rewards`` entries carry them, as rewards.py's
    REWARD_META gave them, beside their statistics)."""
    try:
        return [RewardMeta.of(entry) for entry in report["rewards"]]
    except (TypeError, ValueError) as exc:
        raise UserError(f"not a score report as `inspect score` writes it: rewards: {exc}",
                        where=str(Path(run_dir) / rundir.SCORE_REPORT),
                        fix="re-run `finetune inspect score RUN` (never edit it by hand)") from None


def load_scored(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / rundir.SCORED
    if not path.is_file():
        raise UserError(f"no {rundir.SCORED} in {run_dir}", fix="run `finetune inspect score RUN` first")
    return runfiles.check_scored(jsonio.read_jsonl(path), path)


def _score_all(rm: RewardModule, samples: list[dict[str, Any]], progress: Callable[[], None] | None = None,
               whys: dict[str, list[str | None]] | None = None
               ) -> tuple[dict[str, list[float | None]], dict[str, list[str | None]]]:
    values: dict[str, list[float | None]] = {}
    errors: dict[str, list[str | None]] = {}
    for r in rm.rewards:
        reasons: list[str | None] = []
        values[r.name], errors[r.name] = rm.score(r, samples, whys=reasons)
        if whys is not None:
            whys[r.name] = reasons
        if progress:
            progress()
    return values, errors


def _row_verdicts(rm: RewardModule, scores: dict[str, float | None], errs: dict[str, str]) -> dict[str, Any]:
    passes = {r.name: r.passes(scores[r.name]) for r in rm.rewards}
    # None (not applicable) is skipped; an exception counts as a fail, as TRL would give no credit.
    gated = [r for r in rm.by_role("format", "correctness") if scores[r.name] is not None or r.name in errs]
    correctness = [r for r in rm.by_role("correctness") if scores[r.name] is not None or r.name in errs]
    all_pass = bool(gated) and all(passes[r.name] for r in gated)
    success = ((bool(correctness) and all(passes[r.name] for r in correctness)) if rm.by_role("correctness")
               else all_pass)
    total = sum(r.weight * v for r in rm.rewards if (v := scores[r.name]) is not None and math.isfinite(v))
    return {"passes": passes, "all_pass": all_pass, "success": success, "total": total}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021) from c successes in n samples."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def zero_std_note(base: dict[str, Any]) -> str | None:
    """A line when TRL's fp32 rounding hides prompts that teach nothing: the prediction counts a group as
    zero-std only when its float32 std is ~0, and equal weighted totals that are not exact in binary
    (0.2 + 1.0) leave a residue, so 0/k and k/k prompts can stand beside a prediction near 0."""
    stuck = base["share_zero"] + base["share_all"]
    predicted = base["predicted_frac_reward_zero_std"]
    if predicted is None or stuck <= predicted + 0.05:
        return None
    return (f"note: {stuck:.0%} of prompts are at 0/k or k/k, yet the predicted frac_reward_zero_std is "
            f"{predicted:.2f}: TRL's float32 totals of equal scores are not exactly equal with these weights "
            "(rounding residue), so it does not count those groups — they still give (almost) no advantage. "
            "Judge the difficulty filter by the 0/k + k/k share.")


def base_success(successes_by_prompt: dict[Any, list[bool]], num_generations: int, source: str,
                 temperature: float | None, scores_by_prompt: dict[Any, list[list[float | None]]],
                 weights: list[float]) -> dict[str, Any]:
    """Mean success, pass@k per prompt, shares 0/k and k/k, predicted frac_reward_zero_std, verdict.

    ``scores_by_prompt`` holds each prompt's per-reward scores (spec order) of the same samples: the
    prediction is :func:`finetune.zerostd.predicted_zero_std`, as TRL logs it (the filter's too)."""
    from finetune import zerostd

    per_prompt = []
    for row, succ in successes_by_prompt.items():
        n, c = len(succ), sum(succ)
        per_prompt.append({"row": row, "n": n, "successes": c, "pass@1": c / n, f"pass@{n}": pass_at_k(n, c, n)})
    total = sum(p["n"] for p in per_prompt)
    mean = sum(p["successes"] for p in per_prompt) / total if total else 0.0
    zero = sum(p["successes"] == 0 for p in per_prompt) / len(per_prompt)
    full = sum(p["successes"] == p["n"] for p in per_prompt) / len(per_prompt)
    g = num_generations
    # TRL counts a group as zero std on its fp32 weighted totals, not on success/failure
    predicted = zerostd.predicted_zero_std([scores_by_prompt[p["row"]] for p in per_prompt], weights, g)
    if mean <= NEVER:
        verdict, message = "never_succeeds", (
            f"the model never succeeded in {total} samples over {len(per_prompt)} prompts"
            f"{f' at temperature {temperature:g}' if temperature else ''}: the gap is format or task "
            "understanding, not policy optimisation — go back to SFT (lora-qlora-recipes) and return "
            "when base success is non-zero")
    elif full >= SATURATED_SHARE:
        verdict, message = "saturated", (
            f"{full:.0%} of prompts are solved in every sample: GRPO groups would have zero advantage "
            "(nothing left to learn) — use harder prompts")
    else:
        verdict, message = "learnable", (
            f"the model succeeds sometimes (mean {mean:.0%}): the regime where GRPO sharpens what already works")
    return {"source": source, "temperature": temperature, "prompts": len(per_prompt), "samples": total,
            "mean_success": mean, "share_zero": zero, "share_all": full, "num_generations": g,
            "predicted_frac_reward_zero_std": predicted, "verdict": verdict, "message": message,
            "per_prompt": per_prompt}


def _base_temperature(run_dir: Path) -> float | None:
    """The temperature base_samples.jsonl was drawn at: sample_info.json's record, None when unknown
    (imported without --base-temperature)."""
    path = run_dir / "sample_info.json"
    if not path.exists():
        return None
    info = jsonio.read_json_object(path, what="sample_info.json", fix="sample again (`finetune inspect sample`)")
    record = info.get("imported_base") if "imported_base" in info else info.get("base_success")
    temperature = record.get("temperature") if isinstance(record, dict) else None
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))):
        raise UserError(f"the base samples' temperature is {temperature!r:.40}, not a number", where=str(path),
                        fix="sample again (`finetune inspect sample`)")
    return None if temperature is None else float(temperature)


def mark_provisional(base: dict[str, Any], spec: RunSpec, stand_in: bool) -> None:
    """Say what the base-success evidence lacks against the spec's base-success settings; any gap
    makes the verdict provisional (the seed's test is many samples per prompt at low temperature)."""
    want = spec.inspection.base_success
    missing = []
    if stand_in:
        missing.append(f"training samples ({rundir.SAMPLES}) stand in for base samples; run `inspect sample` "
                       "without --no-base (or --import-base FILE)")
    if base["prompts"] < want.prompts:
        missing.append(f"{base['prompts']} prompt(s), the spec asks {want.prompts}")
    fewest = min((p["n"] for p in base["per_prompt"]), default=0)
    if fewest < want.samples_per_prompt:
        missing.append(f"as few as {fewest} sample(s) per prompt, the spec asks {want.samples_per_prompt}")
    t = base.get("temperature")
    if t is None:
        missing.append(f"sampling temperature unknown, the spec asks {want.temperature:g} "
                       "(give --base-temperature with --import-base)")
    elif abs(t - want.temperature) > 1e-9:
        missing.append(f"sampled at temperature {t:g}, the spec asks {want.temperature:g}")
    base["provisional"] = bool(missing)
    base["missing"] = missing
    if missing:
        base["message"] += " — PROVISIONAL: " + "; ".join(missing)


def _stats(r: RewardMeta, values: list[float | None], errors: list[str | None],
           rows: list[dict[str, Any]]) -> dict[str, Any]:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return {**r.as_dict(), "n": len(values), "mean": statistics.fmean(finite) if finite else None,
            "std": statistics.pstdev(finite) if len(finite) > 1 else (0.0 if finite else None),
            "min_seen": min(finite) if finite else None, "max_seen": max(finite) if finite else None,
            "none": sum(v is None and e is None for v, e in zip(values, errors)),
            "exceptions": sum(e is not None for e in errors),
            "non_finite": sum(v is not None and not math.isfinite(v) for v in values),
            # over the rows the reward applies to (a None score is "not applicable" or an error, counted above)
            "pass_rate": (sum(row["passes"][r.name] for row, v in zip(rows, values) if v is not None) /
                          applicable) if (applicable := sum(v is not None for v in values)) else None}


def count_tests(cell: Any, test_format: str) -> int:
    """How many tests a dataset cell holds (the unit_tests reward's formats; 0 when unusable)."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError:  # a HumanEval test source: one test per assert statement
            return len(re.findall(r"^\s*assert\b", cell, re.M))
    if isinstance(cell, dict) and isinstance(cell.get("inputs"), list):
        return len(cell["inputs"])
    if isinstance(cell, list):
        return len(cell)
    return 0


def tests_report(spec: RunSpec, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per unit_tests reward: how many visible and hidden tests the scored rows carry (min / max / rows
    without any), so a reader sees whether code that hard-codes the prompt's examples can pass."""
    out = []
    for r in spec.rewards:
        tests = reading_of(r).tests
        if tests is None:
            continue
        by_row: dict[Any, tuple[int, int]] = {}
        for s in samples:
            cols = s.get("columns") or {}
            hidden = cols.get(tests.hidden) if tests.hidden else None
            fmt = tests.format_of(cols)
            by_row[s.get("row", s["id"])] = (count_tests(cols.get(tests.column), fmt), count_tests(hidden, fmt))
        kinds = {}
        for index, kind in enumerate(("visible", "hidden")):
            counts = [c[index] for c in by_row.values()]
            kinds[kind] = {"min": min(counts, default=0), "max": max(counts, default=0),
                           "rows_without": sum(c == 0 for c in counts)}
        out.append({"reward": r.name, "tests_column": tests.column, "hidden_tests_column": tests.hidden,
                    "rows": len(by_row), **kinds})
    return out


def compute(run_dir: str | Path, spec: RunSpec, *, caches: bool = True,
            channel: Channel | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score samples (and base samples), detect flags, run probes: ``(rows, report)``; writes nothing.

    Pure given the run directory's files: ``inspect score`` writes its result, ``inspect gate`` runs
    it again (``caches=False``: no judge answer is reused) and compares. ``channel`` (an
    :class:`finetune.inspect.isolate.Channel` when run in the isolated child) hears which reward is
    called and each progress step. ``report["scored_sha256"]`` is left None for the writer to fill.
    """
    run_dir = Path(run_dir)
    rm = load_rewards(run_dir, [r.name for r in spec.rewards])
    if channel is not None:
        rm.funcs = {name: channel.guard(name, func) for name, func in rm.funcs.items()}
    if not caches:
        rm.disable_caches()
    samples = load_samples(run_dir / rundir.SAMPLES)
    base_path = run_dir / rundir.BASE_SAMPLES
    base_samples = load_samples(base_path) if base_path.is_file() else []
    inputs = scored_inputs(run_dir, spec)
    step = channel.progress if channel is not None else None

    whys: dict[str, list[str | None]] = {}
    values, errors = _score_all(rm, samples, step, whys)
    rm.disable_caches()  # the determinism re-score must not be answered from a judge cache
    rescored, _ = _score_all(rm, samples, step)
    base_scores = _score_all(rm, base_samples, step) if base_samples else None
    probe_result = probes_mod.run_probes(rm, spec, samples)
    if step:
        step()

    rows = []
    for i, s in enumerate(samples):
        scores = {r.name: values[r.name][i] for r in rm.rewards}
        errs = {r.name: e for r in rm.rewards if (e := errors[r.name][i])}
        why = {r.name: w for r in rm.rewards if (w := whys[r.name][i])}
        rows.append({**s, "rewards": scores, "errors": errs, **({"why": why} if why else {}),
                     **_row_verdicts(rm, scores, errs)})
    base = _base_report(rm, spec, rows, base_samples, base_scores, _base_temperature(run_dir))
    # a checkpoint set (finetune.inspect.checkpoint) measures a trained policy: its success rate is the
    # training's result, not a flag about the reward
    flag_list = flags_mod.detect(rm, spec, rows, rescored, probe_result, None if rundir.is_set(run_dir) else base)
    for row in rows:
        row["flags"] = [f["id"] for f in flag_list if row["id"] in f["sample_ids"]]
    report = {
        "inputs": inputs,
        "scored_sha256": None,
        "samples": len(rows),
        "rewards": [_stats(r, values[r.name], errors[r.name], rows) for r in rm.rewards],
        "base_success": base,
        "flags": flag_list,
        "not_applicable": flags_mod.not_applicable(rm.rewards),
        "probes": probe_result["probes"],
        "controls": probe_result["controls"],
        "layout_accepted_by_format_rewards": probe_result["layout_accepted"],
        "probe_gold": probe_result["gold"],
        "tests": tests_report(spec, samples),
    }
    return rows, report


def _base_report(rm: RewardModule, spec: RunSpec, rows: list[dict[str, Any]], base_samples: list[dict[str, Any]],
                 base_scores: tuple[dict[str, list[float | None]], dict[str, list[str | None]]] | None,
                 base_temperature: float | None) -> dict[str, Any]:
    from finetune import zerostd

    g = spec.training.num_generations
    weights = [r.weight for r in rm.rewards]
    groups: dict[Any, list[bool]] = {}
    per_reward: dict[Any, list[list[float | None]]] = {}
    if base_scores:
        bv, be = base_scores
        for i, s in enumerate(base_samples):
            scores = {r.name: bv[r.name][i] for r in rm.rewards}
            errs = {r.name: e for r in rm.rewards if (e := be[r.name][i])}
            groups.setdefault(s["row"], []).append(_row_verdicts(rm, scores, errs)["success"])
            per_reward.setdefault(s["row"], []).append([scores[r.name] for r in rm.rewards])
        base = base_success(groups, g, rundir.BASE_SAMPLES, base_temperature, per_reward, weights)
    else:
        for row in rows:
            groups.setdefault(row["row"], []).append(row["success"])
            per_reward.setdefault(row["row"], []).append([row["rewards"][r.name] for r in rm.rewards])
        base = base_success(groups, g, rundir.SAMPLES + " (no base samples: training temperature)",
                            spec.generation.temperature, per_reward, weights)
    mark_provisional(base, spec, stand_in=not base_scores)
    trained: dict[Any, list[list[float | None]]] = {}
    for row in rows:
        trained.setdefault(row["row"], []).append([row["rewards"][r.name] for r in rm.rewards])
    multi = [t for t in trained.values() if len(t) > 1]  # each prompt's samples as one group, judged as TRL does
    base["observed_zero_std_groups"] = (sum(zerostd.group_zero_std(t, weights, len(t)) for t in multi) / len(multi)
                                        if multi else None)
    return base


def compute_isolated(run_dir: str | Path, spec: RunSpec, *, caches: bool = True,
                     on_progress: Callable[[], None] | None = None
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`compute` in a child process: a reward that exits or kills its process is a UserError naming it."""
    from finetune.inspect import isolate

    run_dir = Path(run_dir)
    if not (run_dir / rundir.SAMPLES).is_file():
        raise UserError(f"no {rundir.SAMPLES} in {run_dir}",
                        fix="run `finetune inspect sample SPEC` (or --import FILE)")
    if not (run_dir / rundir.REWARDS).is_file():
        raise UserError(f"no {rundir.REWARDS} in {run_dir}", where=str(run_dir),
                        fix="run `finetune rewards render SPEC` first")
    result: tuple[list[dict[str, Any]], dict[str, Any]] = isolate.run(
        compute, run_dir, spec, what=str(run_dir / rundir.REWARDS), on_progress=on_progress, caches=caches)
    return result


def score_run(run_dir: str | Path, spec: RunSpec, console: Console | None = None) -> dict[str, Any]:
    """Score in an isolated child (:func:`compute_isolated`), then write scored.jsonl + score_report.json."""
    run_dir = Path(run_dir)
    from rich.progress import Progress

    from finetune.rewards.columns import check_dataset, check_samples

    check_dataset(spec, required=False)  # a column a reward reads must exist: exit 2, nothing written
    for name in (rundir.SAMPLES, rundir.BASE_SAMPLES):
        if (run_dir / name).is_file():
            check_samples(spec, load_samples(run_dir / name), str(run_dir / name))
    steps = len(spec.rewards) * (3 if (run_dir / rundir.BASE_SAMPLES).is_file() else 2) + 1
    before = scored_inputs(run_dir, spec)
    with Progress(console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task("scoring", total=steps)
        rows, report = compute_isolated(run_dir, spec, on_progress=lambda: bar.advance(task))
    atomic.crash_point("score:computed")  # tests only: the moment between scoring and the commit
    write_score(run_dir, spec, rows, report, before)
    return report


def write_score(run_dir: Path, spec: RunSpec, rows: list[dict[str, Any]], report: dict[str, Any],
                before: dict[str, str]) -> None:
    """scored.jsonl + score_report.json as one commit under the run directory's lock
    (:func:`finetune.commit.commit_files`), refused when what was scored changed meanwhile (another
    `inspect sample`, a re-render): the pair on disk is always one scoring of the files beside it."""
    # A NaN/inf score is stored as null (jsonio refuses raw non-finite JSON); the report's `non_finite`
    # count and the `non_finite` flag keep what happened.
    scored = jsonio.jsonl_text(run_dir / rundir.SCORED, rows, nonfinite="null")
    report["scored_sha256"] = hashlib.sha256(scored.encode("utf-8")).hexdigest()
    text = jsonio.json_text(run_dir / rundir.SCORE_REPORT, report, nonfinite="null")

    def unchanged() -> None:  # under the lock: no sampling or render can land between this and the switch
        now, used = scored_inputs(run_dir, spec), report["inputs"]
        changed = sorted(k for k in set(now) | set(before) | set(used)
                         if not now.get(k) == before.get(k) == used.get(k))
        if changed:
            raise UserError(f"{', '.join(changed)} changed while scoring; nothing written", where=str(run_dir),
                            fix="run `finetune inspect score` again (one sampling or render at a time)")

    # scored.jsonl is switched first: a reader that does not recover sees either the pair or a report
    # whose scored_sha256 no longer matches (stale), never a report vouching for other rows
    commit.commit_files(run_dir, {rundir.SCORED: scored, rundir.SCORE_REPORT: text}, check=unchanged)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Per-reward table, base success, flags and passing probes."""
    from rich.markup import escape
    from rich.table import Table

    from finetune.literals import visible

    t = Table(title=f"rewards on {report['samples']} samples")
    for col in ("reward", "role", "mean", "std", "pass", "None", "exceptions"):
        t.add_column(col)

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3g}"

    for r in report["rewards"]:
        t.add_row(r["name"], r["role"], fmt(r["mean"]), fmt(r["std"]), fmt(r["pass_rate"]), str(r["none"]),
                  str(r["exceptions"]))
    console.print(t)
    b = report["base_success"]
    console.print(f"base success ({b['source']}): mean {b['mean_success']:.1%}, prompts 0/k {b['share_zero']:.0%}, "
                  f"k/k {b['share_all']:.0%}, predicted frac_reward_zero_std {b['predicted_frac_reward_zero_std']:.2f} "
                  f"(num_generations={b['num_generations']}) → {b['verdict']}: {b['message']}")
    note = zero_std_note(b)
    if note:
        console.print(note)
    for f in report["flags"]:
        # a message may quote a completion: shown marked (literals.visible), never as console markup
        console.print(f"[red]FLAG[/red] {f['id']}: {escape(visible(f['message']))}")
    gold_note = (report.get("probe_gold") or {}).get("note")
    if gold_note:
        console.print(f"[yellow]probes[/yellow]: {gold_note}")
    for n in report.get("not_applicable", []):
        console.print(f"not applicable: {n['check']}" + (f":{n['reward']}" if n["reward"] else "")
                      + f" — {n['reason']}")
    by_probe: dict[str, list[dict[str, Any]]] = {}
    for p in report["probes"]:
        by_probe.setdefault(p["probe"], []).append(p)
    for name, group in by_probe.items():
        passing = [p for p in group if p["passing"]]
        if passing:
            ex = passing[0]
            console.print(f"[red]PROBE PASSES[/red] {name} on {len(passing)}/{len(group)} prompts — {ex['shows']}; "
                          f"passed by {', '.join(sorted({n for p in passing for n in p['passed_by']}))}; "
                          f"e.g. {ex['id']}: {ex['completion'][:120]!r}")
    for t in report.get("tests", []):
        console.print(f"{t['reward']}: tests per prompt row — visible {t['visible']['min']}..{t['visible']['max']} "
                      f"('{t['tests_column']}'), hidden {t['hidden']['min']}..{t['hidden']['max']} "
                      + (f"('{t['hidden_tests_column']}'; {t['hidden']['rows_without']} of {t['rows']} rows have "
                         "none)" if t["hidden_tests_column"] else "(no hidden_tests_column: code that hard-codes "
                         "the prompt's examples can pass)"))
    n_pass = sum(p["passing"] for p in report["probes"])
    console.print(f"{len(report['flags'])} red flag(s), {n_pass} of {len(report['probes'])} hack probe(s) passing")
