"""The `tool_call` reward against a careful reader, beside a naive peer, on tests/data/tool_call_corpus.jsonl.

The project's reward is rendered from a real spec (`type: tool_call`, the row's tools column, the scenario's
per-argument rules) into a rewards.py and called TRL-style. The peer is what a tool-calling RL script
usually writes: "regex the JSON and compare dicts" — the first `{...}` span of the text (a conversational
completion: its content plus its parsed tool calls as JSON), `json.loads`, then `name ==` and
`arguments ==` the expected call. A row is accepted on a full score (1.0); labels come from the corpus
(tests/data/build_tool_corpus.py says how a reader labels).

Targets: 0 false positives, false negatives <= 1% of rows, ahead of the peer.
Run: .venv/bin/python benchmarks/bench_tool_reward.py [--show-errors]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "tool_call_corpus.jsonl"
_COUNTER = itertools.count()
_JSON_SPAN = re.compile(r"\{.*\}", re.DOTALL)


def load_rows(path: Path = CORPUS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def render_reward(rules: dict[str, Any], folder: Path) -> Any:
    """rewards.py of a one-reward spec (tool_call, tools from the `tools` column), imported by path."""
    from pydantic import TypeAdapter

    from finetune.rewards.registry import RewardSpec
    from finetune.rewards.render import render_sources

    entry = {"name": "tool_ok", "type": "tool_call", "tools_column": "tools", "arguments": rules}
    spec = TypeAdapter(RewardSpec).validate_python(entry)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in render_sources([spec], run_name="bench").items():
        (folder / name).write_text(text, encoding="utf-8")
    module_spec = importlib.util.spec_from_file_location(f"_bench_tool_{next(_COUNTER)}", folder / "rewards.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def finetune_scores(rows: list[dict[str, Any]]) -> list[tuple[float | None, str]]:
    """(score, reason) per row from the rendered reward, one rendering per distinct rule set."""
    out: list[tuple[float | None, str]] = [(None, "")] * len(rows)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[json.dumps(r["rules"], sort_keys=True)].append(i)
    with tempfile.TemporaryDirectory() as tmp:
        for n, (rules, idx) in enumerate(groups.items()):
            module = render_reward(json.loads(rules), Path(tmp) / f"r{n}")
            whys: list[list[str]] = []
            scores = module.tool_ok(prompts=[rows[i]["prompt"] for i in idx],
                                    completions=[rows[i]["completion"] for i in idx],
                                    expected_call=[rows[i]["expected_call"] for i in idx],
                                    tools=[rows[i]["tools"] for i in idx],
                                    log_extra=lambda key, values, whys=whys: whys.append(values))
            for j, i in enumerate(idx):
                out[i] = (scores[j], whys[0][j])
    return out


def naive_peer(completion: Any, expected: dict[str, Any]) -> float:
    """Regex the first {...} span, json.loads it, compare name and arguments as dicts."""
    if isinstance(completion, list):
        parts = []
        for m in completion:
            parts.append(m.get("content") or "")
            parts += [json.dumps(c.get("function", c)) for c in m.get("tool_calls") or []]
        completion = "\n".join(parts)
    match = _JSON_SPAN.search(completion)
    if not match:
        return 0.0
    try:
        obj = json.loads(match.group(0))
    except ValueError:
        return 0.0
    ok = isinstance(obj, dict) and obj.get("name") == expected["name"] \
        and obj.get("arguments") == expected["arguments"]
    return 1.0 if ok else 0.0


def confusion(accepts: list[bool], labels: list[bool]) -> dict[str, int]:
    return {"fp": sum(a and not lab for a, lab in zip(accepts, labels)),
            "fn": sum(lab and not a for a, lab in zip(accepts, labels)),
            "rows": len(labels)}


def measure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    labels = [bool(r["accept"]) for r in rows]
    ours = finetune_scores(rows)
    ours_accept = [s is not None and s >= 1.0 for s, _ in ours]
    peer_accept = [naive_peer(r["completion"], r["expected_call"]) >= 1.0 for r in rows]
    reason_wrong = [r["id"] for r, (_, why) in zip(rows, ours) if why != r["reason"]]
    return {"finetune": confusion(ours_accept, labels), "naive_peer": confusion(peer_accept, labels),
            "reason_mismatches": reason_wrong, "ours": ours, "ours_accept": ours_accept, "peer_accept": peer_accept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args(argv)
    rows = load_rows()
    result = measure(rows)
    n = len(rows)
    print(f"tool_call corpus: {n} rows ({sum(r['accept'] for r in rows)} accept), "
          f"{len({r['family'] for r in rows})} families")
    print(f"{'system':<12} {'FP':>4} {'FN':>4} {'FN %':>6}")
    for system in ("finetune", "naive_peer"):
        c = result[system]
        print(f"{system:<12} {c['fp']:>4} {c['fn']:>4} {100 * c['fn'] / n:>6.1f}")
    peer, ours = result["naive_peer"], result["finetune"]
    print(f"errors (FP+FN): finetune {ours['fp'] + ours['fn']} vs naive peer {peer['fp'] + peer['fn']}")
    print(f"reason codes differing from the label: {len(result['reason_mismatches'])}")
    by_family: Counter[str] = Counter()
    for r, a in zip(rows, result["peer_accept"]):
        if a != r["accept"]:
            by_family[r["family"]] += 1
    print("naive peer errors by family: " + ", ".join(f"{k} {v}" for k, v in sorted(by_family.items())))
    if args.show_errors:
        for r, a, (s, why) in zip(rows, result["ours_accept"], result["ours"]):
            if a != r["accept"] or why != r["reason"]:
                print(f"  {r['id']}: label {r['accept']}/{r['reason']} got {s}/{why}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.exit(main())
