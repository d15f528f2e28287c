"""Reward accuracy against a careful reader, side by side: the project's default-spec rewards, TRL 1.16's
`trl.rewards.accuracy_reward` and raw `math_verify.verify(parse(gold), parse(completion))`.

Corpora (tests/data/, see its README.md): reward_corpus.jsonl (development), reward_heldout.jsonl (kept
apart), reward_external.jsonl (Math-Verify's own test cases as completions + published verifier pitfalls).
Each row names the default spec it is judged under (`kind`, tests/data/spec_kinds.yaml); that spec is
written as a real spec.yaml with a one-row dataset holding the row's columns, rendered with the real CLI
(`finetune rewards render`), and its rewards.py is called TRL-style through the gate's own scorer
(`finetune.inspect.rewardmod`). A row is accepted by the project when every format and correctness reward
passes its threshold (what the gate compares with the reader's `accept`); a peer accepts on a score of 1.
Peers are scored on the math-shaped kinds only (they have no notion of JSON or code). Ambiguous rows are
counted apart, never as errors.

Targets: corpus — 0 false positives, false negatives <= 1% of unambiguous rows; external — fewer
false positives AND fewer false negatives than both peers.
Run: .venv/bin/python benchmarks/bench_reward_accuracy.py [--corpus NAME ...] [--show-errors]
     [--counts-by rule|kind] [--systems finetune,trl,math_verify] [--math-timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CORPORA = {"corpus": "reward_corpus.jsonl", "heldout": "reward_heldout.jsonl", "external": "reward_external.jsonl"}
PEER_KINDS = ("boxed_math", "answer_tag_math", "gsm8k_hash", "math_any")
SYSTEMS = ("finetune", "trl", "math_verify")
LABELS = ("accept", "correct", "well_formed")


def load_rows(name_or_path: str) -> list[dict[str, Any]]:
    path = Path(name_or_path) if name_or_path.endswith(".jsonl") else DATA / CORPORA[name_or_path]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def spec_kinds() -> dict[str, list[dict[str, Any]]]:
    return yaml.safe_load((DATA / "spec_kinds.yaml").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------ project --

# --math-timeout: a math reward's per-item deadline for this measurement. The default spec's 2 s is a
# training-time budget; on a loaded machine an item that runs past it scores None, which this benchmark would
# count as a rejection — a timing artefact, not a judgement. None keeps the default spec as written.
MATH_TIMEOUT_S: float | None = None


def render_kind(kind: str, rewards: list[dict[str, Any]], columns: Iterable[str], folder: Path) -> Path:
    """Write spec.yaml + a one-row dataset for ``kind`` and render it with the real CLI; the run dir."""
    if MATH_TIMEOUT_S is not None:
        rewards = [{**r, "timeout_s": MATH_TIMEOUT_S} if r.get("type") == "math" else r for r in rewards]
    run_dir = folder / kind
    (run_dir / "data").mkdir(parents=True)
    row = {"prompt": "Q"}
    row.update({c: "x" for c in columns})
    (run_dir / "data" / "train.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    spec = {"name": f"corpus-{kind}".replace("_", "-"), "model": "Qwen/Qwen3-1.7B",
            "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt"},
            "rewards": rewards, "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
            "generation": {"max_prompt_length": 256, "max_completion_length": 1024}}
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    cli = [sys.executable, "-m", "finetune", "rewards", "render", str(run_dir / "spec.yaml")]
    done = subprocess.run(cli, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")})
    if done.returncode != 0:
        raise SystemExit(f"rendering the {kind} spec failed ({done.returncode}): {done.stderr.strip()}")
    return run_dir


def project_judgements(rows: list[dict[str, Any]], folder: Path) -> dict[str, dict[str, Any]]:
    """Per row id: {"accept", "correct", "well_formed"} as the default-spec rewards judge it."""
    from finetune.inspect.rewardmod import load_rewards

    kinds = spec_kinds()
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    out: dict[str, dict[str, Any]] = {}
    for kind, kind_rows in sorted(by_kind.items()):
        columns = sorted({c for r in kind_rows for c in r["columns"]})
        module = load_rewards(render_kind(kind, kinds[kind], columns, folder))
        items = [{"prompt": r["prompt"], "completion": r["completion"], "columns": r["columns"]} for r in kind_rows]
        passed: dict[str, list[bool]] = {}
        scores: dict[str, list[Any]] = {}
        for reward in module.by_role("format", "correctness"):
            values, _ = module.score(reward, items)
            passed[reward.name] = [reward.passes(v) for v in values]
            scores[reward.name] = values
        fmt = [r.name for r in module.by_role("format")]
        cor = [r.name for r in module.by_role("correctness")]
        for i, row in enumerate(kind_rows):
            well_formed = all(passed[n][i] for n in fmt) if fmt else None
            correct = all(passed[n][i] for n in cor)
            out[row["id"]] = {"accept": correct and (well_formed is not False), "correct": correct,
                              "well_formed": well_formed, "scores": {n: v[i] for n, v in scores.items()}}
    return out


# -------------------------------------------------------------------------------------- peers --

def trl_judgements(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from trl.rewards import accuracy_reward

    out = {}
    for row in rows:
        if row["kind"] not in PEER_KINDS:
            continue
        score = accuracy_reward([[{"role": "assistant", "content": row["completion"]}]], [row["gold"]])[0]
        out[row["id"]] = {"accept": score == 1.0, "correct": score == 1.0, "well_formed": None, "scores": score}
    return out


def math_verify_judgements(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from math_verify import parse, verify

    out = {}
    for row in rows:
        if row["kind"] not in PEER_KINDS:
            continue
        try:
            ok = bool(verify(parse(row["gold"]), parse(row["completion"])))
        except Exception:  # a peer that raises rejects; counted like any other rejection
            ok = False
        out[row["id"]] = {"accept": ok, "correct": ok, "well_formed": None, "scores": ok}
    return out


JUDGES = {"finetune": project_judgements, "trl": trl_judgements, "math_verify": math_verify_judgements}


# ------------------------------------------------------------------------------------ scoring --

@dataclass
class Tally:
    rows: int = 0
    agree: int = 0
    fp: int = 0
    fn: int = 0
    ambiguous: int = 0
    fp_ids: list[str] = field(default_factory=list)
    fn_ids: list[str] = field(default_factory=list)

    def add(self, row: dict[str, Any], predicted: bool, label: str = "accept") -> None:
        if row["ambiguous"]:
            self.ambiguous += 1
            return
        truth = row["label"][label]
        self.rows += 1
        if predicted == truth:
            self.agree += 1
        elif predicted:
            self.fp += 1
            self.fp_ids.append(row["id"])
        else:
            self.fn += 1
            self.fn_ids.append(row["id"])

    @property
    def agreement(self) -> float:
        return self.agree / self.rows if self.rows else float("nan")

    @property
    def fn_rate(self) -> float:
        return self.fn / self.rows if self.rows else float("nan")


def tally(rows: list[dict[str, Any]], judged: dict[str, dict[str, Any]], label: str = "accept",
          key: str | None = None) -> dict[str, Tally]:
    """Tallies of one system's judgements (rows it did not judge are left out), overall or per ``key``."""
    out: dict[str, Tally] = defaultdict(Tally)
    for row in rows:
        j = judged.get(row["id"])
        if j is None or j[label] is None:
            continue
        out["all" if key is None else str(row[key])].add(row, bool(j[label]), label)
    return dict(out)


def evaluate(rows: list[dict[str, Any]], systems: Iterable[str] = SYSTEMS) -> dict[str, dict[str, dict[str, Any]]]:
    judged = {}
    with tempfile.TemporaryDirectory(prefix="bench-reward-accuracy-") as tmp:
        for system in systems:
            judged[system] = (JUDGES[system](rows, Path(tmp)) if system == "finetune" else JUDGES[system](rows))
    return judged


# ----------------------------------------------------------------------------------- printing --

def print_table(title: str, rows: list[dict[str, Any]], judged: dict[str, dict[str, dict[str, Any]]]) -> None:
    ambiguous = sum(r["ambiguous"] for r in rows)
    print(f"\n== {title}: {len(rows)} rows ({ambiguous} ambiguous, left out of the counts)")
    print(f"{'system':<34}{'rows':>6}{'agree':>7}{'agree%':>8}{'FP':>5}{'FN':>5}{'FN%':>7}")
    for system, judgements in judged.items():
        t = tally(rows, judgements).get("all", Tally())
        name = {"finetune": "finetune default-spec rewards", "trl": "trl.rewards.accuracy_reward",
                "math_verify": "math_verify verify(parse, parse)"}[system]
        print(f"{name:<34}{t.rows:>6}{t.agree:>7}{100 * t.agreement:>7.1f}%{t.fp:>5}{t.fn:>5}"
              f"{100 * t.fn_rate:>6.1f}%")
    if "finetune" in judged:
        for label in ("correct", "well_formed"):
            t = tally(rows, judged["finetune"], label).get("all", Tally())
            print(f"  finetune vs reader's {label:<12}{t.rows:>6}{t.agree:>7}{100 * t.agreement:>7.1f}%"
                  f"{t.fp:>5}{t.fn:>5}")
    peers = [s for s in judged if s != "finetune"]
    if peers and "finetune" in judged:
        subset = [r for r in rows if r["kind"] in PEER_KINDS]
        same = tally(subset, judged["finetune"]).get("all", Tally())
        print(f"  finetune on the peers' {len(subset)} math-shaped rows: agree {100 * same.agreement:.1f}% "
              f"FP {same.fp} FN {same.fn}")


def print_counts(rows: list[dict[str, Any]], judged: dict[str, dict[str, dict[str, Any]]], key: str) -> None:
    per = {s: tally(rows, j, key=key) for s, j in judged.items()}
    keys = sorted({k for t in per.values() for k in t})
    header = "".join(f"{s[:11] + ' FP/FN':>18}" for s in judged)
    print(f"\n{key:<24}{'rows':>6}{header}")
    for k in keys:
        n = max(per[s].get(k, Tally()).rows for s in judged)
        cells = "".join(f"{(f'{per[s][k].fp}/{per[s][k].fn}' if k in per[s] else '-'):>18}" for s in judged)
        print(f"{k:<24}{n:>6}{cells}")


def print_errors(rows: list[dict[str, Any]], judged: dict[str, dict[str, dict[str, Any]]]) -> None:
    by_id = {r["id"]: r for r in rows}
    for system, judgements in judged.items():
        t = tally(rows, judgements).get("all", Tally())
        for kind, ids in (("FP", t.fp_ids), ("FN", t.fn_ids)):
            for rid in ids:
                r = by_id[rid]
                text = r["completion"].replace("\n", "\\n")
                text = text if len(text) <= 160 else text[:70] + " … " + text[-80:]
                print(f"{system:<12}{kind} {rid} [{r['kind']}/{r['rule']}] gold={r['gold']!r} "
                      f"scores={judgements[rid]['scores']}\n    reader: {r['reason']}\n    completion: {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", help="corpus name (corpus|heldout|external) or a "
                        ".jsonl path; repeatable (default: all three)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of "
                        f"{','.join(SYSTEMS)}")
    parser.add_argument("--show-errors", action="store_true", help="print every disagreement with its reason")
    parser.add_argument("--counts-by", choices=("rule", "kind"), help="FP/FN per rule tag or per kind")
    parser.add_argument("--math-timeout", type=float, metavar="S", help="per-item deadline of the math rewards "
                        "(default: the spec's); raise it on a loaded machine, where a timeout scores None")
    args = parser.parse_args(argv)
    global MATH_TIMEOUT_S
    MATH_TIMEOUT_S = args.math_timeout
    systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        print(f"unknown system(s): {', '.join(unknown)} (choose from {', '.join(SYSTEMS)})", file=sys.stderr)
        return 2
    for name in args.corpus or list(CORPORA):
        rows = load_rows(name)
        judged = evaluate(rows, systems)
        print_table(name, rows, judged)
        if args.counts_by:
            print_counts(rows, judged, args.counts_by)
        if args.show_errors:
            print_errors(rows, judged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
