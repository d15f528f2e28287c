"""`type: json_match` against a careful reader on invoice-extraction answers, beside a naive peer.

Corpus: tests/data/json_match_corpus.jsonl (built by tests/data/build_json_corpus.py; each row labelled
`correct` / `well_formed` / `accept` with a reason). The project's spec is SPEC below: a `json_match` format
companion (role format: the JSON Schema derived from each row's gold) gating a `json_match` correctness reward,
rendered by the real renderer and called TRL-style. A row is accepted when both pass their thresholds.

The naive peer is what a first verifier usually is: `json.loads` the last `{...}` of the completion and
compare the dict with the gold (`==`).

Targets: on `accept`, the project makes 0 false positives and at most 1 % false negatives, fewer errors than
the peer; the correctness reward alone likewise on `correct`, the format role alone on `well_formed`.
Run: .venv/bin/python benchmarks/bench_json_reward.py [--show-errors]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "json_match_corpus.jsonl"
FIELDS: dict[str, Any] = {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01},
                          "currency": "code", "invoice_number": "code"}
SPEC: list[dict[str, Any]] = [
    {"name": "json_shape", "type": "json_match", "role": "format", "answer_column": "gold", "fields": FIELDS,
     "weight": 0.2},
    {"name": "json_fields", "type": "json_match", "answer_column": "gold", "fields": FIELDS},
]


def load_rows(path: Path = CORPUS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def render(folder: Path, entries: list[dict[str, Any]] | None = None) -> Any:
    """The spec's rewards.py rendered into ``folder`` and imported by path, as train.py loads it."""
    from pydantic import TypeAdapter

    from finetune.rewards.registry import RewardSpec
    from finetune.rewards.render import render_sources

    specs = [TypeAdapter(RewardSpec).validate_python(e) for e in entries or SPEC]
    for name, text in render_sources(specs, run_name="bench_json").items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_bench_json_rewards_{abs(hash(folder))}", folder / "rewards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def finetune_scores(rows: list[dict[str, Any]], module: Any) -> dict[str, list[bool]]:
    """Per row: the format role passes, the correctness reward (ungated) passes, and both (the composite)."""
    prompts = [r["prompt"] for r in rows]
    completions = [r["completion"] for r in rows]
    golds = [r["columns"]["gold"] for r in rows]
    shape = module.json_shape(prompts=prompts, completions=completions, gold=golds)
    fields = module.json_fields(prompts=prompts, completions=completions, gold=golds)
    import rewards_jsonmatch  # loaded by rewards.py beside it

    ungated = [rewards_jsonmatch.score(c, g, {k: v if isinstance(v, dict) else {"match": v} for k, v in FIELDS.items()})[0]
               for c, g in zip(completions, golds)]
    return {"well_formed": [s == 1.0 for s in shape], "correct": [s == 1.0 for s in ungated],
            "accept": [a == 1.0 and b == 1.0 for a, b in zip(shape, fields)]}


_LAST_OBJECT = re.compile(r"\{[^{}]*\}", re.S)


def naive_peer(completion: str, gold: dict[str, Any]) -> bool:
    """json.loads the last {...} of the completion and compare the dicts."""
    found = _LAST_OBJECT.findall(completion)
    if not found:
        return False
    try:
        return bool(json.loads(found[-1]) == gold)
    except ValueError:
        return False


def counts(predicted: list[bool], truth: list[bool], ambiguous: list[bool]) -> dict[str, int]:
    """False positives / negatives on the unambiguous rows; disagreements on ambiguous rows apart."""
    clear = [(p, t) for p, t, a in zip(predicted, truth, ambiguous) if not a]
    fp = sum(p and not t for p, t in clear)
    fn = sum(t and not p for p, t in clear)
    apart = sum(p != t for p, t, a in zip(predicted, truth, ambiguous) if a)
    return {"fp": fp, "fn": fn, "positives": sum(t for _, t in clear), "rows": len(clear), "ambiguous_differ": apart}


def measure(rows: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    rows = rows if rows is not None else load_rows()
    with tempfile.TemporaryDirectory() as tmp:
        module = render(Path(tmp))
        ours = finetune_scores(rows, module)
    peer = [naive_peer(r["completion"], r["columns"]["gold"]) for r in rows]
    out: dict[str, dict[str, Any]] = {}
    ambiguous = [bool(r["ambiguous"]) for r in rows]
    for label in ("accept", "correct", "well_formed"):
        truth = [r["label"][label] for r in rows]
        out[f"finetune/{label}"] = {**counts(ours[label], truth, ambiguous), "errors_at": [
            r["id"] for r, p, t in zip(rows, ours[label], truth) if p != t and not r["ambiguous"]]}
    truth = [r["label"]["accept"] for r in rows]
    out["naive_peer/accept"] = {**counts(peer, truth, ambiguous), "errors_at": [
        r["id"] for r, p, t in zip(rows, peer, truth) if p != t and not r["ambiguous"]]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-errors", action="store_true", help="print the rows each system gets wrong")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    rows = load_rows()
    results = measure(rows)
    by_id = {r["id"]: r for r in rows}
    print(f"json_match corpus: {len(rows)} rows ({sum(r['label']['accept'] for r in rows)} accepted by the reader, "
          f"{sum(r['ambiguous'] for r in rows)} ambiguous, counted apart)")
    print(f"{'system / label':28} {'FP':>4} {'FN':>4} {'FN %':>7} {'errors':>7} {'ambiguous, differ':>18}")
    for name, r in results.items():
        fn_pct = 100.0 * r["fn"] / max(r["positives"], 1)
        print(f"{name:28} {r['fp']:>4} {r['fn']:>4} {fn_pct:>6.1f}% {r['fp'] + r['fn']:>7} "
              f"{r['ambiguous_differ']:>18}")
        if args.show_errors:
            for row_id in r["errors_at"]:
                print(f"    {row_id} {by_id[row_id]['rule']}: {by_id[row_id]['reason']}")
    ours, peer = results["finetune/accept"], results["naive_peer/accept"]
    print(f"errors on accept: finetune {ours['fp'] + ours['fn']} vs naive peer {peer['fp'] + peer['fn']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
