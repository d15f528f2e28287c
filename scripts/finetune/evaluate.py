"""`finetune eval RUN --checkpoint DIR`: success on the held-out prompts before (the base policy) and after training.

The held-out split (:mod:`finetune.heldout`: never trained on, never read in Phase 1) is sampled ``k`` times per
prompt from the run's base model and from the checkpoint, with the gated sampling settings (the spec's generation
section, which the PASS binds) and one seed for both sides; both are scored by the gated rewards in an isolated
child (a reward that exits is one line naming it, as in Phase 1). Per reward and for ``accept`` (every format and
correctness reward passes) it reports the success rate before and after and the paired change over prompts: a
bootstrap interval of the mean per-prompt change and an exact two-sided sign test. The live inspection's
reward-hacking checks (``watch.live_flags``, ``watch.probe_hits``) run on the checkpoint's answers and the base's.
vLLM samples when it is importable (``--backend auto``), transformers otherwise; an environment spec rolls out whole
episodes with transformers, as Phase 1 does.

Writes ``RUN/eval/NAME/`` in one switch (:func:`finetune.commit.staged_dir`): ``eval.json``, ``report.md``,
``before_after.png`` and ``samples.jsonl`` (every sample with its scores and side).
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio, rundir
from finetune.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.inspect.isolate import Channel
    from finetune.spec import RunSpec

Row = dict[str, Any]
RESAMPLES = 2000  # bootstrap resamples of the prompts
LEVEL = 0.95  # two-sided interval level
ACCEPT = "accept"  # every format and correctness reward passes (the reward-roles contract's accept)
REPORT, RESULT, PLOT, SAMPLES = "report.md", "eval.json", "before_after.png", "samples.jsonl"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


# ----------------------------------------------------------------------------------------------
# statistics: paired over prompts


def sign_test(up: int, down: int) -> float:
    """Exact two-sided binomial sign test of ``up`` rises against ``down`` falls (ties dropped); 1.0 without any."""
    n = up + down
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(up, down) + 1)) / 2 ** n
    return float(min(1.0, 2 * tail))


def paired(before: list[float], after: list[float], seed: int, resamples: int = RESAMPLES) -> Row:
    """The per-prompt change after − before: its mean, a percentile bootstrap interval over prompts (seeded),
    the sign test and the counts of prompts that rose, fell and stayed."""
    n = len(before)
    diffs = [a - b for a, b in zip(after, before)]
    mean = sum(diffs) / n if n else math.nan
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples)) if n else []
    lo_i, hi_i = int((1 - LEVEL) / 2 * resamples), int((1 + LEVEL) / 2 * resamples) - 1
    up, down = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {"prompts": n, "before": sum(before) / n if n else math.nan, "after": sum(after) / n if n else math.nan,
            "change": mean, "interval": [means[lo_i], means[hi_i]] if means else None, "level": LEVEL,
            "resamples": resamples, "p_sign_test": sign_test(up, down), "rose": up, "fell": down,
            "same": n - up - down}


# ----------------------------------------------------------------------------------------------
# scoring in an isolated child (the gated rewards are agent-written code)


def score_child(run_dir: Path, names: list[str], items: list[Row], channel: Channel | None = None) -> Row:
    """In the isolated child: every item scored by every gated reward, with its verdicts, and the rewards' meta."""
    from finetune.inspect.rewardmod import load_rewards
    from finetune.inspect.score import _row_verdicts, _score_all

    rm = load_rewards(run_dir, names)
    if channel is not None:
        rm.funcs = {name: channel.guard(name, func) for name, func in rm.funcs.items()}
    rm.disable_caches()  # an evaluation never reuses a judge answer
    values, errors = _score_all(rm, items, channel.progress if channel is not None else None)
    out = []
    for i in range(len(items)):
        scores = {r.name: values[r.name][i] for r in rm.rewards}
        errs = {r.name: e for r in rm.rewards if (e := errors[r.name][i])}
        out.append({"scores": scores, "errors": errs, **_row_verdicts(rm, scores, errs)})
    meta = [r.as_dict() for r in rm.rewards]  # plain data across the isolation boundary
    return {"rows": out, "meta": meta}


def _score(run_dir: Path, spec: RunSpec, items: list[Row]) -> Row:
    from finetune.inspect import isolate

    result: Row = isolate.run(score_child, run_dir, [r.name for r in spec.rewards], items,
                              what=str(run_dir / rundir.REWARDS))
    return result


# ----------------------------------------------------------------------------------------------
# the models and their samples


def checkpoint_folder(checkpoint: str) -> Path:
    """The checkpoint to evaluate: a local folder with a model (config.json) or a LoRA adapter
    (adapter_config.json: transformers loads its base and attaches it), weights and a tokenizer."""
    p = Path(checkpoint).expanduser()
    if not p.is_dir():
        raise UserError(f"no such checkpoint folder: {p}", where="--checkpoint",
                        fix="name the folder train.py saved (train/ or train/checkpoint-N)")
    if not ((p / "config.json").is_file() or (p / "adapter_config.json").is_file()):
        raise UserError(f"{p} holds no model (no config.json or adapter_config.json)", where="--checkpoint",
                        fix="name a saved checkpoint (trainer.save_model / save_pretrained)")
    if not any(p.glob("*.safetensors")) and not any(p.glob("*.bin")):
        raise UserError(f"{p} has no weights (*.safetensors / *.bin)", where="--checkpoint",
                        fix="name a saved checkpoint (trainer.save_model / save_pretrained)")
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{p} has no tokenizer", where="--checkpoint",
                        fix="save the tokenizer with the checkpoint (tokenizer.save_pretrained(folder))")
    return p.resolve()


def _sampler(folder: Path, spec: RunSpec, seed: int, device: str | None, backend: str) -> tuple[Any, str]:
    from finetune.inspect import sample as S

    chosen = S._chosen_backend(backend, device)
    if spec.environment is not None:
        chosen = "transformers"  # episodes are rolled out with transformers (inspect.sample._rollout_generator)
    if chosen == "vllm" and (folder / "adapter_config.json").is_file():
        raise UserError(f"{folder} is a LoRA adapter: vLLM samples merged models here", where="--checkpoint",
                        fix="pass --backend transformers, or merge the adapter (peft merge_and_unload) and save it")
    g = spec.generation
    if chosen == "vllm":
        return S._VllmSampler(str(folder), seed, g.max_prompt_length, g.max_completion_length), chosen
    return S._TransformersSampler(str(folder), device, g.max_prompt_length), chosen


def sample_side(folder: Path, reqs: list[Row], spec: RunSpec, run_dir: Path, seed: int, *, device: str | None,
                backend: str, side: str, console: Console | None) -> tuple[list[Row], str]:
    """``k`` samples per held-out prompt from one model with the gated settings; (rows, backend)."""
    import torch
    from rich.progress import Progress

    from finetune.inspect import sample as S

    torch.manual_seed(seed)
    random.seed(seed)
    sampler, chosen = _sampler(folder, spec, seed, device, backend)
    generate = S._generate if spec.environment is None else S._rollout_generator(spec, run_dir, sampler)
    g = spec.generation
    k = len(reqs[0]["ids"]) if reqs else 0
    with Progress(console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task(f"sampling the {side} ({chosen})", total=len(reqs))
        rows: list[Row] = generate(sampler, reqs, k, g, g.temperature, bar, task)
    for r in rows:
        r["side"] = side
        r["id"] = f"{side}-{r['id']}"
    del sampler
    return rows, chosen


# ----------------------------------------------------------------------------------------------
# what the scores say


def _per_prompt(rows: list[Row], scored: list[Row], key: str, meta: dict[str, Row]) -> dict[int, float]:
    """Per held-out row: the share of its samples that pass ``key`` (a reward name, or ACCEPT)."""
    hits: dict[int, list[bool]] = {}
    for row, s in zip(rows, scored):
        ok = bool(s["success"] if key == ACCEPT else s["passes"].get(key, False))
        hits.setdefault(int(row["row"]), []).append(ok)
    return {r: sum(v) / len(v) for r, v in hits.items()}


def _mean_total(rows: list[Row], scored: list[Row]) -> dict[int, float]:
    totals: dict[int, list[float]] = {}
    for row, s in zip(rows, scored):
        totals.setdefault(int(row["row"]), []).append(float(s["total"]))
    return {r: sum(v) / len(v) for r, v in totals.items()}


def summarize(before: list[Row], after: list[Row], scored_before: list[Row], scored_after: list[Row],
              meta: list[Row], seed: int) -> Row:
    """Per reward and for accept: success before / after and the paired change; the weighted total too."""
    by_name = {m["name"]: m for m in meta}
    prompts = sorted({int(r["row"]) for r in before})
    out: Row = {}
    for key in [ACCEPT] + [m["name"] for m in meta]:
        b, a = _per_prompt(before, scored_before, key, by_name), _per_prompt(after, scored_after, key, by_name)
        out[key] = {**paired([b[p] for p in prompts], [a[p] for p in prompts], seed),
                    "role": "accept" if key == ACCEPT else by_name[key]["role"],
                    "threshold": None if key == ACCEPT else by_name[key]["threshold"]}
    tb, ta = _mean_total(before, scored_before), _mean_total(after, scored_after)
    out["total"] = {**paired([tb[p] for p in prompts], [ta[p] for p in prompts], seed), "role": "weighted total",
                    "threshold": None}
    return out


def hacking(rows: list[Row], scored: list[Row], meta: list[Row], max_completion_length: int) -> Row:
    """The live inspection's reward-hacking checks on one side's answers: red flags and probe-shaped passes."""
    from finetune import watch
    from finetune.rewards.lib.rewards_meta import RewardMeta

    metas = [RewardMeta.of(m) for m in meta]
    watch_rows = [{"completion": r["completion"] if isinstance(r["completion"], str) else str(r["completion"]),
                   "completion_tokens": r.get("completion_tokens"), "scores": s["scores"], "total": s["total"]}
                  for r, s in zip(rows, scored)]
    return {"flags": watch.live_flags(watch_rows, metas, max_completion_length),
            "probes_passing": watch.probe_hits(watch_rows, metas)}


# ----------------------------------------------------------------------------------------------
# the report


def _pct(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1%}"


def _num(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _change(s: Row, percent: bool = True) -> str:
    def fmt(v: float) -> str:
        return f"{v * 100:+.1f} pts" if percent else f"{v:+.3f}"

    lo, hi = s["interval"] or (math.nan, math.nan)
    return f"{fmt(s['change'])} [{fmt(lo)}, {fmt(hi)}]"


def report_lines(result: Row) -> list[str]:
    """report.md: what was measured, the table, the hacking checks and how to read them."""
    h, rows = result["heldout"], result["results"]
    lines = [f"# Held-out evaluation: {result['name']}", "",
             f"- base: `{result['base']}` — checkpoint: `{result['checkpoint']}`",
             f"- held-out prompts: {h['prompts']} ({h['source']}: `{h['path']}`; never trained on, none sampled in "
             f"Phase 1) × {result['k']} samples each, seed {result['seed']}, backend {result['backend']}",
             f"- sampling: the gated settings (temperature {result['generation']['temperature']}, top_p "
             f"{result['generation']['top_p']}, max_completion_length {result['generation']['max_completion_length']})",
             f"- gate: {result['gate']['status']} (the rewards scoring here are the ones it binds)", "",
             f"| measure | role | before | after | change [{LEVEL:.0%} bootstrap over prompts] | sign test p | "
             "prompts up / down / same |", "|---|---|---|---|---|---|---|"]
    for key, s in rows.items():
        percent = key != "total"
        show = _pct if percent else _num
        lines.append(f"| {key} | {s['role']} | {show(s['before'])} | {show(s['after'])} | {_change(s, percent)} | "
                     f"{s['p_sign_test']:.3g} | {s['rose']} / {s['fell']} / {s['same']} |")
    lines += ["", "An interval that excludes 0 is a change this many prompts can show; one that spans 0 is not "
              "(more held-out prompts narrow it: dataset.heldout.prompts).", "", "## Reward-hacking checks "
              "(the live inspection's, on these answers)", ""]
    for side in ("before", "after"):
        hk = result["hacking"][side]
        flags = ", ".join(f"{f['id']} ({f['count']})" for f in hk["flags"]) or "none"
        probes = ", ".join(f"{p['probe']} passes {p['reward']} ({p['count']})" for p in hk["probes_passing"]) or "none"
        lines.append(f"- {side}: red flags: {flags}; probe-shaped answers passing: {probes}")
    lines += ["", f"Plot: `{PLOT}`; every sample with its scores: `{SAMPLES}`."]
    return lines


def plot(result: Row, path: Path) -> None:
    """Before / after success per measure with the change's interval (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in result["results"] if k != "total"]
    before = [result["results"][k]["before"] for k in keys]
    after = [result["results"][k]["after"] for k in keys]
    # the change's interval drawn around 'after': before + [lo, hi]
    spans = [(result["results"][k]["change"], result["results"][k]["interval"] or [0.0, 0.0]) for k in keys]
    err = [[max(0.0, c - lo) for c, (lo, _) in spans], [max(0.0, hi - c) for c, (_, hi) in spans]]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(keys)), 3.2))
    xs = range(len(keys))
    ax.bar([x - 0.2 for x in xs], before, width=0.4, label="before (base)", color="#9aa5b1")
    ax.bar([x + 0.2 for x in xs], after, width=0.4, yerr=err, capsize=4, label="after (checkpoint)",
           color="#2f6fab")
    ax.set_xticks(list(xs), keys)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("held-out success")
    ax.set_title(f"{result['heldout']['prompts']} held-out prompts × {result['k']}; bars on 'after': "
                 f"{LEVEL:.0%} interval of the change", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# the command


def _requests(spec: RunSpec, rows: list[Row], split_rows: list[int], k: int) -> list[Row]:
    from finetune.inspect import sample as S

    reqs = S._requests(spec, rows, list(range(len(rows))), k, "h")
    for req, row in zip(reqs, split_rows):
        req["row"] = row
        req["ids"] = [f"h{row:05d}-s{j:02d}" for j in range(k)]
    return reqs


def _gate(run_dir: Path, spec: RunSpec) -> Row:
    from finetune.inspect.gate import verify_gate

    check = verify_gate(run_dir, spec)
    if not check.ok:
        raise UserError(f"the gate PASS does not hold: {check.reason}", where=str(run_dir / rundir.GATE),
                        fix="eval scores with the gated rewards: pass Phase 1's gate (`finetune inspect gate RUN`)")
    record = check.record.dump() if check.record is not None else {}
    return {"status": record.get("status"), "hashes": record.get("hashes")}


def default_name(checkpoint: Path) -> str:
    import re

    name = re.sub(r"[^A-Za-z0-9._-]+", "-", checkpoint.name).strip("-.") or "checkpoint"
    return name[:64]


def evaluate(run: str | Path, checkpoint: str, *, name: str | None = None, k: int = 4, seed: int | None = None,
             device: str | None = None, backend: str = "auto", console: Console | None = None) -> tuple[Row, Path]:
    """Measure, write RUN/eval/NAME/ and return (eval.json's record, that folder)."""
    from finetune import heldout, hub
    from finetune.spec import load_spec

    spec_file, run_dir = rundir.resolve(run)
    if spec_file is None:
        raise UserError(f"no {rundir.SPEC} in {run}", fix="pass the run directory (or its spec.yaml)")
    spec = load_spec(spec_file)
    folder = checkpoint_folder(checkpoint)
    name = name or default_name(folder)
    gate = _gate(run_dir, spec)
    split = heldout.current(spec, run_dir)
    seed = spec.training.seed if seed is None else seed
    reqs = _requests(spec, heldout.split_rows(spec, split), split.rows, k)
    base_folder = hub.resolve_model(spec.model, spec.source.parent if spec.source else None, console=console)
    before, backend_used = sample_side(base_folder, reqs, spec, run_dir, seed, device=device, backend=backend,
                                       side="before", console=console)
    after, _ = sample_side(folder, reqs, spec, run_dir, seed, device=device, backend=backend, side="after",
                           console=console)
    scored = _score(run_dir, spec, before + after)
    sb, sa = scored["rows"][:len(before)], scored["rows"][len(before):]
    result: Row = {
        "name": name, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "base": spec.model, "checkpoint": str(folder), "k": k, "seed": seed, "backend": backend_used,
        "generation": spec.generation.model_dump(mode="json"), "gate": gate,
        "heldout": {"source": split.source, "path": split.path, "prompts": len(split.rows), "rows": split.rows,
                    "prompts_sha256": split.prompts_sha256},
        "results": summarize(before, after, sb, sa, scored["meta"], seed),
        "hacking": {"before": hacking(before, sb, scored["meta"], spec.generation.max_completion_length),
                    "after": hacking(after, sa, scored["meta"], spec.generation.max_completion_length)},
    }
    samples = [{**r, **s} for r, s in zip(before + after, sb + sa)]
    return result, write(run_dir, name, result, samples)


def write(run_dir: Path, name: str, result: Row, samples: list[Row]) -> Path:
    from finetune.commit import staged_dir

    target = run_dir / rundir.EVAL_DIR / name
    with staged_dir(target, keep=lambda n: False) as tmp:  # one evaluation, never a mix of two
        jsonio.write_json(tmp / RESULT, result, nonfinite="null")
        jsonio.write_jsonl(tmp / SAMPLES, samples, nonfinite="null")
        (tmp / REPORT).write_text("\n".join(report_lines(result)) + "\n", encoding="utf-8")
        plot(result, tmp / PLOT)
    return target


def read(run_dir: Path, name: str) -> Row:
    """eval.json of RUN/eval/NAME (UserError when missing or not an evaluation)."""
    path = run_dir / rundir.EVAL_DIR / name / RESULT
    if not path.is_file():
        raise UserError(f"no evaluation at {path}", where=str(run_dir),
                        fix=f"run `finetune eval {run_dir} --checkpoint DIR --name {name}` first")
    doc = jsonio.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise UserError(f"{path} is not an evaluation record", where=str(path), fix="re-run `finetune eval`")
    return doc
