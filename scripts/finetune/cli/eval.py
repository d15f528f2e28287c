"""`finetune eval RUN --checkpoint DIR`: held-out success before (base) and after training, with a paired interval
over prompts, per reward, and the live inspection's reward-hacking checks on the checkpoint's answers
(finetune.evaluate)."""

from __future__ import annotations

import argparse

from finetune.cli.argtypes import count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="the run directory (or its spec.yaml); its gate must PASS")
    parser.add_argument("--checkpoint", required=True, metavar="DIR",
                        help="the trained model folder (train/, train/checkpoint-N; a LoRA adapter folder too)")
    parser.add_argument("--name", metavar="NAME", help="RUN/eval/NAME/ (default: the checkpoint folder's name)")
    parser.add_argument("--k", type=count(1, 64), default=4, help="samples per held-out prompt (default 4)")
    parser.add_argument("--seed", type=count(0, 2**31 - 1), default=None,
                        help="sampling and bootstrap seed, one for both sides (default: training.seed)")
    parser.add_argument("--device", default=None, help="torch device for transformers sampling (default: cuda if "
                        "available, else cpu)")
    parser.add_argument("--backend", choices=["auto", "vllm", "transformers"], default="auto",
                        help="auto: vLLM when importable, transformers otherwise")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from finetune.evaluate import evaluate, report_lines
    from finetune.inspect.checkpoint import check_name

    name = check_name(args.name) if args.name else None
    result, target = evaluate(args.run, args.checkpoint, name=name, k=args.k, seed=args.seed, device=args.device,
                              backend=args.backend, console=Console(stderr=True))
    print("\n".join(report_lines(result)[2:-2]))
    print(f"wrote {target}/ (eval.json, report.md, before_after.png, samples.jsonl)")
    return 0
