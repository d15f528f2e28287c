"""`finetune publish RUN --repo OWNER/NAME --license ID`: the person's command — a model card carrying the gate's
provenance and the push of the checkpoint with the person's own token, private unless --public (finetune.publish).
The plugin's guard denies it to the agent; `--dry-run` writes the card and the upload plan only."""

from __future__ import annotations

import argparse

from finetune.cli.argtypes import count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="the run directory (or its spec.yaml); its gate must PASS")
    parser.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the Hub model repo to push to")
    parser.add_argument("--license", required=True, metavar="ID",
                        help="the model's licence for the card (e.g. apache-2.0; the base model's terms apply)")
    parser.add_argument("--checkpoint", metavar="DIR", help="the folder to publish (default: RUN/train)")
    parser.add_argument("--eval", metavar="NAME", dest="eval_name",
                        help="the held-out evaluation the card reports (RUN/eval/NAME, from `finetune eval`)")
    parser.add_argument("--weights", choices=["merged", "adapter"], default="merged",
                        help="merged: a LoRA adapter merged into its base (a full model as it is); adapter: the "
                             "adapter alone")
    parser.add_argument("--dataset", action="append", default=[], metavar="ID",
                        help="a Hub dataset id for the card's metadata (repeatable; local data is never named)")
    parser.add_argument("--public", action="store_true", help="a public repo (default: private)")
    parser.add_argument("--examples", type=count(0, 20), default=0, metavar="N",
                        help="put N of the trained model's held-out answers in the card (default 0: nothing from "
                             "the run's data)")
    parser.add_argument("--dry-run", action="store_true", help="write the card and the plan; push nothing")


def run(args: argparse.Namespace) -> int:
    from finetune.publish import CARD, publish

    plan, target = publish(args.run, args.repo, checkpoint=args.checkpoint, eval_name=args.eval_name,
                           public=args.public, weights=args.weights, license=args.license, datasets=args.dataset,
                           examples=args.examples, dry_run=args.dry_run)
    where = "private" if plan["private"] else "PUBLIC"
    if plan["dry_run"]:
        print(f"dry run: would push {len(plan['files'])} files to {where} repo {plan['repo']} ({plan['weights']})")
    else:
        print(f"pushed {len(plan['files'])} files to {where} repo {plan['repo']}: {plan['pushed']}")
    print(f"wrote {target}/ ({CARD}: the model card; publish.json: the plan)")
    return 0
