#!/usr/bin/env python3
"""Sample the requests `finetune inspect sample --emit-requests` wrote, on a GPU machine, with vLLM.

Written by the llm-finetuning plugin; it needs only the standard library plus, for the offline mode,
the `vllm` package. Every prompt is sent as the token ids training will feed the model (the chat
template already applied, truncated like training), with the run spec's sampling settings, so the
completions are the ones training would draw. Its output is the plugin's sample format, which
`finetune inspect sample SPEC --import FILE` (and `--import-base FILE`) takes back unchanged.

  offline:  python sample_vllm.py requests.jsonl -o samples.jsonl --model /path/to/the/policy
  server:   trl vllm-serve --model /path/to/the/policy        (or: vllm serve /path/to/the/policy)
            python sample_vllm.py requests.jsonl -o samples.jsonl --server http://localhost:8000

Run it once for requests.jsonl (-> samples.jsonl) and once for base_requests.jsonl (-> base_samples.jsonl).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request
from typing import Any


def read_requests(path: str) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                req = json.loads(line)
                if not isinstance(req.get("prompt_token_ids"), list) or not req.get("ids"):
                    sys.exit(f"{path}:{n}: not a request line of `finetune inspect sample --emit-requests`")
                if req.get("tools"):  # one generation per request would be a rollout whose calls never ran
                    sys.exit(f"{path}:{n}: this request carries the environment's tools, and this script has no "
                             "tool loop: its single-turn answers are not what training produces. Run `finetune "
                             "inspect sample SPEC --backend transformers` where the plugin and the GPU are, then "
                             "`--import` the rollouts (TRL's message lists)")
                out.append(req)
    return out


def _params(s: dict[str, Any]) -> dict[str, Any]:
    return {"n": s["n"], "temperature": s["temperature"], "top_p": s["top_p"], "top_k": s["top_k"],
            "min_p": s["min_p"], "repetition_penalty": s["repetition_penalty"], "max_tokens": s["max_tokens"],
            "seed": s["seed"]}


def offline(requests: list[dict[str, Any]], model: str) -> list[list[tuple[str, int | None, bool]]]:
    """vLLM's offline engine: one generate() call per distinct sampling setting."""
    from vllm import LLM, SamplingParams

    first = requests[0]["sampling"]
    llm = LLM(model=model, seed=first["seed"], max_model_len=first["max_model_len"])
    results: list[Any] = [None] * len(requests)
    groups: dict[str, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(json.dumps(req["sampling"], sort_keys=True), []).append(i)
    for key, idx in groups.items():
        p = _params(json.loads(key))
        if p["top_k"] <= 0:
            p["top_k"] = -1  # vLLM's "no top-k"
        outs = llm.generate([{"prompt_token_ids": requests[i]["prompt_token_ids"]} for i in idx],
                            SamplingParams(**p), use_tqdm=False)
        for i, out in zip(idx, outs):
            results[i] = [(o.text, len(o.token_ids), o.finish_reason == "length") for o in out.outputs]
    return results


def server(requests: list[dict[str, Any]], url: str) -> list[list[tuple[str, int | None, bool]]]:
    """An OpenAI-compatible completions endpoint: `trl vllm-serve` or `vllm serve`."""
    base = url.rstrip("/")
    with urllib.request.urlopen(base + "/v1/models", timeout=60) as r:
        model = json.load(r)["data"][0]["id"]
    results: list[list[tuple[str, int | None, bool]]] = []  # per prompt: (text, tokens, hit the cap)
    for req in requests:
        body = {"model": model, "prompt": [req["prompt_token_ids"]], **_params(req["sampling"])}
        if body["top_k"] <= 0:
            body["top_k"] = -1
        http = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(http, timeout=3600) as r:
            choices = json.load(r)["choices"]
        results.append([(c["text"], len(c.get("token_ids") or []) or None, c.get("finish_reason") == "length")
                        for c in choices])
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("requests", help="requests.jsonl or base_requests.jsonl")
    ap.add_argument("-o", "--out", required=True, help="output JSONL (the plugin's sample format)")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--model", help="the policy (local folder or hub id) for vLLM's offline engine")
    where.add_argument("--server", help="base URL of a running `trl vllm-serve` / `vllm serve`")
    args = ap.parse_args(argv)
    requests = read_requests(args.requests)
    results = offline(requests, args.model) if args.model else server(requests, args.server)
    rows = []
    for req, outs in zip(requests, results):
        if len(outs) != len(req["ids"]):
            sys.exit(f"prompt row {req['row']}: {len(outs)} completions for {len(req['ids'])} ids")
        for sid, (text, n_tokens, truncated) in zip(req["ids"], outs):
            row = {"id": sid, "row": req["row"], "prompt": req["prompt"], "completion": text,
                   "conversational": req["conversational"], "columns": req["columns"],
                   "truncated": truncated, "source": "vllm"}
            if n_tokens is not None:
                row["completion_tokens"] = n_tokens
            rows.append(row)
    folder = os.path.dirname(os.path.abspath(args.out))
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(f.name, args.out)  # all or nothing: a crash leaves no half file to import
    print(f"wrote {len(rows)} completions to {args.out}")


if __name__ == "__main__":
    main()
