"""`finetune data filter SPEC`: keep only the prompts GRPO can learn from (offline difficulty filter).

A GRPO group whose completions all get the same reward has zero advantage: prompts the model always
solves (k/k) or never solves (0/k) burn generation and dilute the batch. TRL 1.16 has no dynamic
sampling (trl#4764); published recipes (DAPO, Skywork-OR1, Polaris) filter by per-prompt pass rate
before training. This stage samples k completions per prompt with the spec's generation settings,
scores them with the run's *gated* rewards.py (a PASS gate is required and re-verified), and keeps
the prompts whose pass rate lies in ``--keep LO-HI``.

Writes (in the run directory): ``data/pass_rates.jsonl`` (one line per prompt, appended as each
prompt is scored, so a killed run resumes without re-sampling), ``data/filtered.<ext>`` (same format
and columns as the input), ``data/filter_report.md`` + ``data/filter_pass_rates.png``; then binds the
result: the spec gains ``dataset.filter`` and the gate record's hashes gain the filter section and
the filtered file (:func:`finetune.hashing.bound_hashes`), so train.py trains on exactly that file.

The prediction after the filter is made on *fresh* samples (``data/zero_std_check.jsonl``: one group of
num_generations completions for each of ``--check-prompts`` kept prompts, another seed): the samples that
chose the kept prompts cannot judge them — a prompt kept for 1/8 successes is, more often than its
8 samples say, a prompt that usually scores 0/8 (regression to the mean), so an in-sample prediction is
biased low (exactly 0 when k = num_generations). The report also gives the dispersion of the pass rates:
when every prompt is about equally hard, the 0/k and k/k prompts are sampling luck and no offline filter
can lower frac_reward_zero_std.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic
from finetune.errors import CheckFailed, UserError
from finetune.hashing import canonical_json

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.inspect.gaterecord import GateRecord
    from finetune.spec import RunSpec

PASS_RATES = "data/pass_rates.jsonl"
FILTER_REPORT = "data/filter_report.md"
HISTOGRAM = "data/filter_pass_rates.png"
SUMMARY = "data/filter_summary.json"
DEFAULT_K = 8
DEFAULT_KEEP = (0.1, 0.9)  # with k ≤ 9 this drops exactly the 0/k and k/k prompts
ZERO_STD_CHECK = "data/zero_std_check.jsonl"
DEFAULT_CHECK_PROMPTS = 64  # Wilson 95% half-width ≤ ~0.12 at any rate; a few % of a real filter's sampling
CHECK_SEED_OFFSET = 1_000_003  # the check's torch seeds never meet the assessment's (seed + row)


def parse_keep(text: str) -> tuple[float, float]:
    """``LO-HI`` pass-rate bounds, inclusive, 0 ≤ LO ≤ HI ≤ 1."""
    try:
        lo, hi = (float(x) for x in text.split("-", 1))
    except ValueError:
        raise UserError(f"--keep '{text}' is not LO-HI", where="--keep", fix="e.g. --keep 0.1-0.9") from None
    if not 0 <= lo <= hi <= 1:
        raise UserError(f"--keep {text}: need 0 ≤ LO ≤ HI ≤ 1", where="--keep", fix="e.g. --keep 0.1-0.9")
    return lo, hi


def prompt_key(prompt: Any) -> str:
    """A prompt's identity in pass_rates.jsonl: sha256 of its canonical JSON (first 16 hex digits)."""
    return hashlib.sha256(canonical_json(prompt)).hexdigest()[:16]


def settings_digest(spec: RunSpec, k: int, gate_hashes: dict[str, str], seed_offset: int = 0) -> str:
    """What a pass rate depends on: model, generation settings, seed, k and the gated reward files.

    A pass_rates.jsonl line written under other settings is not resumed from."""
    rewards_only = {n: h for n, h in gate_hashes.items() if not n.startswith(("spec:dataset", "dataset."))}
    settings = {"model": spec.model, "generation": spec.generation.model_dump(mode="json"),
                "seed": spec.training.seed, "k": k, "rewards": rewards_only, "lines": 3}  # v3: per-reward scores
    if seed_offset:  # the fresh-sample check (the assessment's digest is unchanged, so its lines resume)
        settings["seed_offset"] = seed_offset
    return hashlib.sha256(canonical_json(settings)).hexdigest()[:16]


def reward_weights(spec: RunSpec) -> list[float]:
    """The reward weights TRL multiplies by (the spec's, in reward order: train.py passes them as reward_weights)."""
    return [float(r.weight) for r in spec.rewards]


def predicted_zero_std(entries: list[dict[str, Any]], weights: list[float], num_generations: int) -> float | None:
    """Expected frac_reward_zero_std on these pass_rates.jsonl lines, as TRL logs it
    (:func:`finetune.zerostd.predicted_zero_std` on each prompt's k per-reward scores)."""
    from finetune import zerostd

    return zerostd.predicted_zero_std([e["scores"] for e in entries], weights, num_generations)

# ------------------------------------------------------------------------------------- resume


def load_done(path: Path, digest: str, keys: dict[int, str]) -> tuple[dict[int, dict[str, Any]], bool]:
    """Lines already written for these settings: ({row: entry}, stale) — stale when other settings wrote it."""
    if not path.is_file():
        return {}, False
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if text and not text.endswith("\n"):
        lines = lines[:-1]  # killed mid-write: that prompt is sampled again
    done: dict[int, dict[str, Any]] = {}
    for n, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise UserError("malformed line", where=f"{path}:{n}",
                            fix=f"delete {path} to sample every prompt again") from None
        if entry.get("settings") != digest:
            return {}, True
        if keys.get(entry.get("row")) == entry.get("key"):
            done[entry["row"]] = entry
    return done, False


def append_line(path: Path, entry: dict[str, Any]) -> None:
    """One O_APPEND write per line: a kill leaves whole lines (and at most one partial last line). A link
    planted at ``path`` (symbolic or hard) is refused: the append never writes outside the run."""
    try:
        atomic.append_bytes(path, (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot append to {path}: {exc.strerror}", where=str(path),
                        fix="remove that link (the run's own file is re-created)") from None


# ------------------------------------------------------------------------------------- sampling


def _engine(spec: RunSpec, *, device: str | None, backend: str, console: Console | None) -> tuple[str, Any]:
    """(backend chosen, sampler): built once per filter and shared by the assessment and the fresh check."""
    from finetune import hub
    from finetune.inspect import sample as S

    g = spec.generation
    model = hub.resolve_model(spec.model, spec.source.parent if spec.source else None, console=console)
    chosen = S._chosen_backend(backend, device)
    if chosen == "vllm":
        return chosen, S._VllmSampler(str(model), spec.training.seed, g.max_prompt_length, g.max_completion_length)
    return chosen, S._TransformersSampler(str(model), device, g.max_prompt_length)


def _sample_and_score(spec: RunSpec, run_dir: Path, rows: list[dict[str, Any]], todo: list[int], k: int,
                      digest: str, out: Path, *, engine: tuple[str, Any], console: Console | None,
                      seed_offset: int = 0, label: str = "pass rates") -> None:
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from finetune.inspect import sample as S
    from finetune.inspect.rewardmod import load_rewards
    from finetune.inspect.score import _row_verdicts, _score_all

    rm = load_rewards(run_dir, [r.name for r in spec.rewards])
    g, seed = spec.generation, spec.training.seed
    chosen, sampler = engine
    columns = [TextColumn(f"[bold]{label}[/] ({{task.fields[backend]}})"), BarColumn(), MofNCompleteColumn(),
               TextColumn("prompts · {task.fields[rate]} prompts/s ·"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task("filter", total=len(todo), backend=chosen, rate="–")
        for start in range(0, len(todo), S.PROMPT_BATCH):
            batch = todo[start:start + S.PROMPT_BATCH]
            # per batch: a resumed run samples the rest as a full run would
            torch.manual_seed(seed + seed_offset + batch[0])
            if isinstance(sampler, S._VllmSampler):  # vLLM seeds each request itself, not from torch's generator:
                sampler.seed = seed + seed_offset + batch[0]  # else the fresh check would redraw the same samples
            reqs = S._requests(spec, rows, batch, k, "f")
            groups = sampler.generate(reqs, k, g, g.temperature)
            items = [{"prompt": r["prompt"], "completion": c["completion"], "conversational": r["conversational"],
                      "columns": r["columns"]} for r, group in zip(reqs, groups) for c in group]
            values, errors = _score_all(rm, items)
            for n, req in enumerate(reqs):
                successes, totals, per_reward = [], [], []
                for j in range(n * k, (n + 1) * k):
                    scores = {r.name: values[r.name][j] for r in rm.rewards}
                    errs = {r.name: e for r in rm.rewards if (e := errors[r.name][j])}
                    verdict = _row_verdicts(rm, scores, errs)
                    successes.append(bool(verdict["success"]))
                    totals.append(float(verdict["total"]))  # the weighted total, for a reader
                    per_reward.append([scores[r.name] for r in rm.rewards])  # what TRL sums, in fp32
                append_line(out, {"row": req["row"], "key": prompt_key(rows[req["row"]][spec.dataset.prompt_column]),
                                  "k": k, "successes": sum(successes), "settings": digest, "backend": chosen,
                                  "completions": [c["completion"] for c in groups[n]], "success": successes,
                                  "totals": totals, "scores": per_reward})
            bar.advance(task, len(batch))
            elapsed = bar.tasks[0].elapsed or 0
            bar.update(task, rate=f"{bar.tasks[0].completed / elapsed:.2f}" if elapsed else "–")


# ------------------------------------------------------------------------------------- outputs


def _data_format(spec: RunSpec, path: Path) -> str:
    from finetune.dataset import data_format

    fmt = data_format(spec, path)
    if fmt == "hf_disk":
        raise UserError("the filter writes jsonl or parquet; this dataset is a datasets.save_to_disk folder",
                        where="dataset.path", fix="export the split to .jsonl or .parquet and point dataset.path at it")
    return fmt


def filtered_bytes(source: Path, fmt: str, rows: list[dict[str, Any]], kept: list[int],
                   run_dir: Path) -> tuple[str, bytes]:
    """(``data/filtered.<ext>``, its bytes): the kept rows, in order, with every column of the input, same format."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(pq.read_table(source).take(kept), sink)
        return "data/filtered.parquet", sink.getvalue().to_pybytes()
    from finetune import jsonio

    name = "data/filtered.jsonl"
    return name, jsonio.jsonl_text(run_dir / name, [rows[i] for i in kept]).encode("utf-8")


def histogram(rates_before: list[float], rates_after: list[float], k: int) -> bytes:
    """The before/after pass-rate histogram as PNG bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = [(i - 0.5) / k for i in range(k + 2)]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.hist(rates_before, bins=bins, alpha=0.55, label=f"all ({len(rates_before)} prompts)", color="#888888")
    ax.hist(rates_after, bins=bins, alpha=0.8, label=f"kept ({len(rates_after)} prompts)", color="#2a7ab9")
    ax.set_xlabel(f"per-prompt pass rate (successes / {k})")
    ax.set_ylabel("prompts")
    ax.set_title("Pass rate per prompt, before and after the filter")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def steps_for(spec: RunSpec, run_dir: Path, rows: int) -> int | None:
    """Optimiser steps the rendered config would make on ``rows`` prompts (the renderer's own values)."""
    from finetune.config import build as config

    try:
        plan = config.build_plan(spec, run_dir, preview=True)
        return config._run_length(plan.kwargs, plan.topology, rows).optimiser_steps
    except (UserError, CheckFailed):
        return None  # the spec does not render for its target: the report says so


def report_md(s: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    def steps(n: int | None) -> str:
        return "n/a (the spec does not render)" if n is None else str(n)

    hist = "\n".join(f"| {c}/{s['k']} | {s['histogram_before'].get(str(c), 0)} "
                     f"| {s['histogram_after'].get(str(c), 0)} |" for c in range(s["k"] + 1))
    zero_std = f"**{pct(s['predicted_zero_std_before'])}** | **{pct(s['predicted_zero_std_after'])}**"
    if s["check_prompts"]:
        lo, hi = s["predicted_zero_std_after_interval"]
        zero_std += f" (95% {lo:.2f}–{hi:.2f}, fresh samples of {s['check_prompts']} kept prompts)"
    return f"""# Difficulty filter: {s['spec_name']}

Sampled **k = {s['k']}** completions for each of {s['assessed']} prompts (of {s['source_rows']} in
`{s['source']}`) with the spec's generation settings (temperature {s['temperature']:g}, seed {s['seed']}),
scored with the gated `rewards.py`. Kept the prompts whose pass rate is in **[{s['keep'][0]:g}, {s['keep'][1]:g}]**:
**{s['kept']} kept**, {s['dropped_never']} never solved (0/{s['k']}), {s['dropped_always']} always solved
({s['k']}/{s['k']}), {s['dropped_other']} outside the range otherwise{s['unassessed_note']}.

| | before | after |
|---|---:|---:|
| prompts | {s['assessed']} | {s['kept']} |
| mean pass rate | {pct(s['mean_before'])} | {pct(s['mean_after'])} |
| predicted `frac_reward_zero_std` (groups of {s['num_generations']}) | {zero_std} |
| the same, on the samples that chose the kept prompts (biased low) | | {pct(s['predicted_zero_std_after_in_sample'])} |
| optimiser steps (rendered config) | {steps(s['steps_before'])} | {steps(s['steps_after'])} |

`frac_reward_zero_std` is predicted as TRL logs it: the std of each group's *weighted total* reward
(all reward functions, with their weights), computed in float32 with TRL's own operations and counted
as zero when `torch.isclose(std, 0)` (`finetune.zerostd`). Per prompt: the share of groups of
G = num_generations drawn from its k scored completions that TRL would count; the prediction is the
mean over prompts. The pass rate decides only what is kept. *Before* is predicted on every assessed
prompt's own samples (nothing selected them: unbiased). *After* is {_after_source(s)} The samples that
chose the kept prompts cannot judge them: a prompt kept for one success in k is, more often than those k
samples say, a prompt that usually scores 0/k (regression to the mean), so the in-sample row is biased low
(0 when k = num_generations). TRL measures fresh groups from a policy that training then moves: as the kept
prompts are learnt they become k/k, and the fraction rises again (published recipes re-filter between stages).

{_dispersion_md(s)}

| successes | prompts before | prompts after |
|---|---:|---:|
{hist}

![pass rates]({Path(HISTOGRAM).name})

Files: `{s['filtered']}` (sha256 `{s['filtered_sha256'][:16]}…`), `{PASS_RATES}`. The spec's
`dataset.filter` names the filtered file; the gate record binds it, so train.py trains on exactly it.
"""


def _after_source(s: dict[str, Any]) -> str:
    if s["check_prompts"]:
        return (f"predicted on fresh samples: one group of {s['num_generations']} completions for each of "
                f"{s['check_prompts']} kept prompts (a seeded random subset, another sampling seed), "
                f"`{ZERO_STD_CHECK}`.")
    return "predicted in-sample only (`--check-prompts 0`): read it as a lower bound."


def _dispersion_md(s: dict[str, Any]) -> str:
    d = s["dispersion"]
    if d is None:
        return "Dispersion of pass rates: n/a (every assessed prompt scored the same)."
    k, n = s["k"], s["assessed"]
    verdict = ("pass rates differ between prompts far more than sampling alone makes them: the 0/k and k/k "
               "prompts are mostly really unsolved / mastered, and dropping them lowers frac_reward_zero_std"
               if d["index"] >= 2 else
               "**pass rates barely differ between prompts beyond sampling noise: most 0/k and k/k prompts are "
               "luck, and the filter can lower frac_reward_zero_std only a little** (a larger --k sees more; "
               "the fresh check above says how much the filter helps)")
    return (f"Dispersion of pass rates: index **{d['index']:.2f}** (variance of the success counts over the "
            f"binomial variance if every prompt were equally hard; 1 = equally hard). Equally hard prompts would "
            f"give {d['expected_never']:.0f} prompts at 0/{k} and {d['expected_always']:.0f} at {k}/{k} of {n}; "
            f"observed {s['dropped_never']} and {s['dropped_always']}: {verdict}.")


# ------------------------------------------------------------------------------------- the stage


def _spec_files(spec_path: Path, section: dict[str, Any]) -> dict[str, str | bytes]:
    """The spec with ``dataset.filter`` (and the original, kept once as spec.yaml.orig), as texts to commit."""
    import yaml

    original = spec_path.read_text(encoding="utf-8")
    data = yaml.safe_load(original)
    data["dataset"]["filter"] = section
    text = _with_filter(original, section)
    if text is None or yaml.safe_load(text) != data:  # a layout the in-place edit does not handle: re-dump
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    files: dict[str, str | bytes] = {spec_path.name: text}
    if not spec_path.with_name(spec_path.name + ".orig").exists():
        files[spec_path.name + ".orig"] = original
    return files


def _node_end(node: Any) -> int:
    """Where a node's own text ends: a block collection ends with its last item (PyYAML's end mark runs on
    over the comments and blank lines after it)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _node_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _node_end(node.value[-1])
    return int(node.end_mark.index)


def _with_filter(text: str, section: dict[str, Any]) -> str | None:
    """``text`` with ``dataset.filter`` set to ``section`` by an edit of that one entry, so every comment and
    the layout of the rest survive (a round trip through safe_dump dropped them all); None when the spec's
    shape is not one this edit handles (the caller re-dumps)."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    dataset = next((v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "dataset"), None)
    if not isinstance(dataset, yaml.MappingNode) or not dataset.value:
        return None
    flow = json.dumps(section, ensure_ascii=False)  # JSON is a YAML flow mapping: one line, no anchors
    if dataset.flow_style:  # dataset: {path: ..., ...}: rewrite that flow mapping (one line) as a whole
        loaded = yaml.safe_load(text)["dataset"]
        start, end = dataset.start_mark.index, dataset.end_mark.index
        return text[:start] + json.dumps({**loaded, "filter": section}, ensure_ascii=False) + text[end:]
    for key, value in dataset.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "filter":
            return text[:key.start_mark.index] + "filter: " + flow + text[_node_end(value):]
    indent = " " * dataset.value[0][0].start_mark.column
    end = _node_end(dataset.value[-1][1])
    if end and text[end - 1] == "\n":  # a block scalar ends after its line break
        return text[:end] + f"{indent}filter: {flow}\n" + text[end:]
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return text[:line_end] + f"\n{indent}filter: {flow}" + text[line_end:]


def _bound_record(spec_path: Path, run_dir: Path, section: dict[str, Any], filtered: tuple[str, bytes],
                  record: GateRecord) -> GateRecord:
    """The gate record re-bound to the filter section and the filtered file — hashed from the bytes about to be
    committed, not read back from disk."""
    from finetune.hashing import FILTERED_FILE, bound_hashes
    from finetune.spec import DataFilterSpec, load_spec

    binding = DataFilterSpec(**section).model_dump(mode="json")  # as the spec will load it
    spec = load_spec(spec_path)
    hashes = bound_hashes(run_dir, spec.reward_section(), data_filter=binding, sampling=spec.sampling_binding(),
                          inspection=spec.inspection_binding(), **spec.heldout_binding())
    hashes[FILTERED_FILE] = hashlib.sha256(filtered[1]).hexdigest()  # the file is committed with the record
    return record.model_copy(update={"hashes": hashes, "dataset_filter": section})


def _commit(spec_path: Path, run_dir: Path, outputs: dict[str, str | bytes], spec_files: dict[str, str | bytes],
            record: GateRecord) -> None:
    """Every output and the gate record in one commit (``gate.write_gate_record``, the one gate writer): a kill
    leaves the run entirely before or after the filter.

    A spec outside the run directory (``-o``) cannot join that commit; it is written after it, so a kill in
    between leaves a gate record binding a filter the spec does not name yet: the gate fails closed
    (`finetune data filter` again finishes it without re-sampling)."""
    from finetune.inspect.gate import write_gate_record

    inside = spec_path.parent.resolve() == run_dir.resolve()
    write_gate_record(run_dir, record, files={**outputs, **(spec_files if inside else {})})
    if not inside:
        for name, text in spec_files.items():
            atomic.write_text(spec_path.with_name(name), str(text))


def run_filter(spec_path: Path, run_dir: Path, *, k: int = DEFAULT_K, max_prompts: int | None = None,
               keep: tuple[float, float] = DEFAULT_KEEP, device: str | None = None, backend: str = "auto",
               console: Console | None = None, check_prompts: int = DEFAULT_CHECK_PROMPTS) -> dict[str, Any]:
    """Sample, score, filter, check on fresh samples, report and bind; returns the summary the report shows."""
    from finetune.dataset import load_rows
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    spec = load_spec(spec_path)
    if k < 2:
        raise UserError(f"--k {k}: a pass rate needs at least 2 samples", where="--k", fix="use --k 4 or more")
    if check_prompts < 0:
        raise UserError(f"--check-prompts {check_prompts} is negative", where="--check-prompts",
                        fix="e.g. --check-prompts 64 (0 skips the fresh-sample check)")
    check = verify_gate(run_dir, spec, rescore=True)  # the pass rates come from rewards re-scored now
    if not check.ok:
        raise CheckFailed(f"refusing to filter: the pass rates must come from the gated rewards, and {check.reason}")
    source = spec.resolve_path(spec.dataset.path)
    fmt = _data_format(spec, source)
    rows = load_rows(spec)
    indices = list(range(len(rows) if max_prompts is None else min(max_prompts, len(rows))))
    keys = {i: prompt_key(rows[i][spec.dataset.prompt_column]) for i in indices}
    record = check.record
    assert record is not None  # a gate that holds carries its record
    hashes = record.hashes
    sample = _Sampler(spec, run_dir, rows, keys, hashes, device, backend, console)
    done = sample(indices, k, 0, PASS_RATES)
    rates = {i: done[i]["successes"] / k for i in indices}
    kept = [i for i in indices if keep[0] - 1e-12 <= rates[i] <= keep[1] + 1e-12]
    if not kept:
        raise CheckFailed(f"no prompt has a pass rate in [{keep[0]:g}, {keep[1]:g}]; nothing to train on "
                          f"(see {run_dir / PASS_RATES})")
    subset = check_subset(kept, check_prompts, spec.training.seed)
    fresh = sample(subset, spec.training.num_generations, CHECK_SEED_OFFSET, ZERO_STD_CHECK) if subset else {}
    assessed = _Assessed(rows, indices, done, kept, [fresh[i] for i in subset], k, keep)
    return _finish(spec, spec_path, run_dir, assessed, fmt, source, record)


class _Sampler:
    """Samples and scores groups for rows into a resumable JSONL file; returns {row: line} for the rows."""

    def __init__(self, spec: RunSpec, run_dir: Path, rows: list[dict[str, Any]], keys: dict[int, str],
                 hashes: dict[str, str], device: str | None, backend: str, console: Console | None) -> None:
        self.spec, self.run_dir, self.rows, self.keys, self.hashes = spec, run_dir, rows, keys, hashes
        self.device, self.backend, self.console = device, backend, console
        self.engine: tuple[str, Any] | None = None  # one model load (a vLLM engine: minutes on CPU) for both passes

    def __call__(self, wanted: list[int], k: int, seed_offset: int, name: str) -> dict[int, dict[str, Any]]:
        digest = settings_digest(self.spec, k, self.hashes, seed_offset)
        out = self.run_dir / name
        out.parent.mkdir(parents=True, exist_ok=True)
        keys = {i: self.keys[i] for i in wanted}
        done, stale = load_done(out, digest, keys)
        if stale:
            if self.console is not None:
                self.console.print(f"{name} was written under other settings (model, generation, k or rewards): "
                                   "sampling every prompt again")
            out.unlink()
        todo = [i for i in wanted if i not in done]
        if self.console is not None and done:
            self.console.print(f"resuming {name}: {len(done)} of {len(wanted)} prompts already sampled")
        if todo:
            label = "pass rates" if not seed_offset else "zero-std check (fresh samples)"
            if self.engine is None:
                self.engine = _engine(self.spec, device=self.device, backend=self.backend, console=self.console)
            _sample_and_score(self.spec, self.run_dir, self.rows, todo, k, digest, out, engine=self.engine,
                              console=self.console, seed_offset=seed_offset, label=label)
            done, _ = load_done(out, digest, keys)
        missing = [i for i in wanted if i not in done]
        if missing:  # pragma: no cover - every prompt sampled above was appended
            raise CheckFailed(f"{len(missing)} prompt(s) have no line in {out}")
        return done


def check_subset(kept: list[int], n: int, seed: int) -> list[int]:
    """Up to ``n`` kept rows for the fresh-sample check: a seeded random subset, in row order (a dataset
    sorted by difficulty still gets a fair sample).

    >>> check_subset([3, 5, 8], 8, 0)
    [3, 5, 8]
    >>> check_subset(list(range(100)), 4, 0)
    [5, 49, 53, 97]
    """
    import random

    return kept if n >= len(kept) else sorted(random.Random(seed).sample(kept, n))


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion (successes may be fractional: a prompt's share of zero-std groups).

    >>> [round(x, 3) for x in wilson(0, 64)]
    [0.0, 0.057]
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def dispersion(successes: list[int], k: int) -> dict[str, float] | None:
    """How much pass rates vary across prompts beyond sampling noise: the variance of the success counts over
    the binomial variance k·p̄·(1−p̄) they would have if every prompt were equally hard (index ≈ 1: the 0/k
    and k/k prompts are luck, and the filter cannot lower frac_reward_zero_std), with the 0/k and k/k counts
    such a homogeneous dataset would show. None when every prompt scored 0/k or every prompt k/k.

    >>> dispersion([0, 8, 0, 8], 8)["index"]
    8.0
    >>> round(dispersion([1, 2, 3, 2], 8)["index"], 2)
    0.33
    """
    n = len(successes)
    p = sum(successes) / (n * k)
    if not 0 < p < 1:
        return None
    mean = p * k
    var = sum((c - mean) ** 2 for c in successes) / n
    return {"index": var / (k * p * (1 - p)), "expected_never": n * (1 - p) ** k, "expected_always": n * p ** k}


class _Assessed:
    """What the sampling found: every assessed row's line, the kept rows and the fresh check's lines."""

    def __init__(self, rows: list[dict[str, Any]], indices: list[int], done: dict[int, dict[str, Any]],
                 kept: list[int], fresh: list[dict[str, Any]], k: int, keep: tuple[float, float]) -> None:
        self.rows, self.indices, self.done, self.kept, self.fresh, self.k, self.keep = (
            rows, indices, done, kept, fresh, k, keep)
        self.rates = {i: done[i]["successes"] / k for i in indices}


def _predictions(spec: RunSpec, a: _Assessed) -> dict[str, Any]:
    """frac_reward_zero_std before (every assessed prompt's own samples: no selection, unbiased) and after:
    on the fresh check when there is one, else in-sample (biased low, and said so)."""
    g, weights = spec.training.num_generations, reward_weights(spec)
    before = predicted_zero_std([a.done[i] for i in a.indices], weights, g)
    in_sample = predicted_zero_std([a.done[i] for i in a.kept], weights, g)
    fresh = predicted_zero_std(a.fresh, weights, g)
    assert before is not None and in_sample is not None  # both prompt sets are non-empty
    after = in_sample if fresh is None else fresh
    interval = None if fresh is None else wilson(fresh * len(a.fresh), len(a.fresh))
    return {"predicted_zero_std_before": before, "predicted_zero_std_after": after,
            "predicted_zero_std_after_in_sample": in_sample, "check_prompts": len(a.fresh),
            "predicted_zero_std_after_interval": interval,
            "dispersion": dispersion([a.done[i]["successes"] for i in a.indices], a.k)}


def _finish(spec: RunSpec, spec_path: Path, run_dir: Path, a: _Assessed, fmt: str, source: Path,
            record: GateRecord) -> dict[str, Any]:
    rows, indices, kept, k, keep, rates = a.rows, a.indices, a.kept, a.k, a.keep, a.rates
    filtered = filtered_bytes(source, fmt, rows, kept, run_dir)
    filtered_path = run_dir / filtered[0]
    before, after = [rates[i] for i in indices], [rates[i] for i in kept]
    predictions = _predictions(spec, a)

    def count(rs: list[float]) -> dict[str, int]:
        return {str(c): sum(round(r * k) == c for r in rs) for c in range(k + 1)}

    section = {"path": os.path.relpath(filtered_path, spec_path.parent), "source": spec.dataset.path, "k": k,
               "keep": [keep[0], keep[1]], "max_prompts": len(indices), "rows": len(kept),
               "pass_rates": os.path.relpath(run_dir / PASS_RATES, spec_path.parent),
               "sha256": hashlib.sha256(filtered[1]).hexdigest(), "source_rows": len(rows),
               "predicted_frac_reward_zero_std": [round(predictions["predicted_zero_std_before"], 4),
                                                  round(predictions["predicted_zero_std_after"], 4)],
               "check_prompts": predictions["check_prompts"]}
    summary = {
        "spec_name": spec.name, "k": k, "keep": list(keep), "source": spec.dataset.path, "source_rows": len(rows),
        "assessed": len(indices), "kept": len(kept), "temperature": spec.generation.temperature,
        "seed": spec.training.seed, "num_generations": spec.training.num_generations,
        "unassessed_note": (f"; the {len(rows) - len(indices)} prompts past --max-prompts are not in the filtered "
                            "file" if len(indices) < len(rows) else ""),
        "mean_before": sum(before) / len(before), "mean_after": sum(after) / len(after), **predictions,
        "steps_before": steps_for(spec, run_dir, len(rows)), "steps_after": steps_for(spec, run_dir, len(kept)),
        "histogram_before": count(before), "histogram_after": count(after),
        "filtered": filtered[0], "filtered_sha256": section["sha256"],
        "kept_rows": kept,
    }
    # Dropped counts exclude kept prompts: with --keep 0-1 (or 0-0.9) a 0/k prompt is kept, not dropped.
    dropped = [i for i in indices if i not in set(kept)]
    summary["dropped_never"] = sum(rates[i] == 0 for i in dropped)
    summary["dropped_always"] = sum(rates[i] == 1 for i in dropped)
    summary["dropped_other"] = sum(0 < rates[i] < 1 for i in dropped)
    from finetune import jsonio

    outputs: dict[str, str | bytes] = {filtered[0]: filtered[1], HISTOGRAM: histogram(before, after, k),
                                       FILTER_REPORT: report_md(summary),
                                       SUMMARY: jsonio.json_text(run_dir / SUMMARY, summary)}
    _commit(spec_path, run_dir, outputs, _spec_files(spec_path, section),
            _bound_record(spec_path, run_dir, section, filtered, record))
    return summary
