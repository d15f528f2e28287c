"""`finetune publish RUN --repo OWNER/NAME`: the person's command — a model card that carries the gate's provenance,
and the push of the checkpoint with the person's own Hugging Face token.

The card (a Hub model card, metadata filled through huggingface_hub's ``ModelCard`` / ``ModelCardData``: base model,
datasets the person names, licence, tags) states how the reward that trained the model was checked: the gate
record's status and time, the sha256 of every file and spec section it binds, the reading's size and who read it,
its blind statement, the recall / precision bounds when the record holds them, every flag acknowledged and the
written reason, the probes run, the variant and the diagnosis that licensed it, and the held-out evaluation
(`finetune eval`: success before and after with its interval). Nothing from the run's data — no prompt, completion
or local path — goes in unless the person asks (``--examples``).

The push is private unless the person says ``--public``; ``--weights adapter`` uploads a LoRA adapter folder as it
is, ``--weights merged`` merges it into its base model first (a full checkpoint uploads as it is). ``--dry-run``
writes the card and the upload plan and contacts nobody. The plugin's guard denies this command to the agent
(:data:`GUARD_DENIED`): it publishes on the person's behalf.

Writes ``RUN/publish/<owner>--<name>/`` (README.md, the card; publish.json, the plan and, after a push, its commit).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from finetune import __version__, jsonio, rundir
from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec

Row = dict[str, Any]
# The plugin's PreToolUse guard (hooks/guard.py) denies `finetune publish` to the agent: its PERSON_COMMANDS carries
# this command's words; commands/finetune.md never pre-approves it.
GUARD_DENIED = ("publish",)
PUBLISH_DIR = "publish"
CARD, PLAN = "README.md", "publish.json"
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
TAGS = ["grpo", "trl", "rlvr", "llm-finetuning", "reward-gated"]


class HubApi(Protocol):
    """What the push needs of huggingface_hub.HfApi (a test passes a fake that records the calls)."""

    def create_repo(self, repo_id: str, *, private: bool, exist_ok: bool, repo_type: str) -> Any: ...

    def upload_folder(self, *, repo_id: str, folder_path: str, commit_message: str, repo_type: str) -> Any: ...


# ----------------------------------------------------------------------------------------------
# what the card states, read from the run directory


def _gate(run_dir: Path, spec: RunSpec) -> Row:
    from finetune.inspect.gate import verify_gate

    check = verify_gate(run_dir, spec, rescore=True)  # what is published was trained on a PASS that still holds
    if not check.ok or not check.record:
        raise UserError(f"the gate PASS does not hold: {check.reason}", where=str(run_dir / rundir.GATE),
                        fix="publish a run whose Phase 1 gate PASSes now (`finetune inspect gate RUN`)")
    return check.record.dump()


def reading(gate: Row) -> Row:
    """Who read how many samples, how blind, what they found: the gate record's counts as the card states them."""
    counts = gate.get("counts") or {}
    blind = gate.get("blind") or {}
    return {"read": counts.get("read"), "agreed": counts.get("agreed"), "min_read": counts.get("min_read"),
            "human": counts.get("human"), "agent": counts.get("agent"),
            "disagreements": len(gate.get("disagreements") or []), "readers": gate.get("readers"),
            "confirmation": bool(gate.get("confirmation")), "blind_statement": blind.get("statement"),
            "reading_blind": blind.get("reading_blind")}


def acknowledged(gate: Row) -> list[Row]:
    """Flags the person waived, each with the written reason the gate record keeps."""
    out = []
    for f in gate.get("flags") or []:
        if isinstance(f, dict) and f.get("status") == "acknowledged":
            ack = f.get("ack") or {}
            out.append({"flag": f.get("id"), "reason": f.get("reason") or ack.get("reason"),
                        "by": ack.get("by"), "time": ack.get("time")})
    return out


def licence(run_dir: Path, spec: RunSpec) -> Row:
    """The variant and what licensed it: the base recipe, a diagnosis naming its symptom, or a MoE model."""
    from finetune.variants import VARIANT_SYMPTOM

    if spec.variant == "grpo":
        return {"variant": "grpo", "licensed_by": "the base recipe (no diagnosis needed)"}
    path = run_dir / rundir.DIAGNOSIS
    doc = jsonio.read_json(path) if path.is_file() else {}
    doc = doc if isinstance(doc, dict) else {}
    symptom = VARIANT_SYMPTOM.get(spec.variant)
    carried = doc.get("variant_licence") if isinstance(doc.get("variant_licence"), dict) else None
    named = next((s for s in doc.get("symptoms") or [] if isinstance(s, dict) and s.get("name") == symptom), None)
    evidence = (carried or {}).get("evidence") or named
    return {"variant": spec.variant, "symptom": symptom,
            "licensed_by": f"diagnosis.json names {symptom}" if evidence else "a mixture-of-experts model (GSPO)",
            "summary": (evidence or {}).get("summary"), "diagnosed": (carried or {}).get("diagnosed") or
            {"time": doc.get("time"), "log": (doc.get("run") or {}).get("log")}}


def evaluation(run_dir: Path, name: str | None, examples: int = 0) -> Row | None:
    """The held-out evaluation the card reports (RUN/eval/NAME/eval.json), or None when none was named; with
    ``examples`` the first that many of the trained model's held-out answers (only when the person asks)."""
    if name is None:
        return None
    from finetune import evaluate

    doc = evaluate.read(run_dir, name)
    if examples:
        rows = [r for _, r in jsonio.read_jsonl(run_dir / rundir.EVAL_DIR / name / evaluate.SAMPLES)]
        doc["examples"] = [r for r in rows if isinstance(r, dict) and r.get("side") == "after"][:examples]
    return doc


def provenance(run_dir: Path, spec: RunSpec, eval_name: str | None, examples: int = 0) -> Row:
    """Every field the card states, from the gate record, the spec, the diagnosis and the evaluation."""
    from finetune.rewards.render import reward_metas

    gate = _gate(run_dir, spec)
    probes = [p for p in gate.get("probes") or [] if isinstance(p, dict)]
    return {
        "gate": {"status": gate.get("status"), "time": gate.get("time"), "hashes": gate.get("hashes") or {},
                 "record_sha256": _sha256(run_dir / rundir.GATE), "versions": gate.get("versions")},
        "reading": reading(gate),
        # recall / precision of the rewards against the reading, when this gate version records them
        "bounds": gate.get("bounds"),
        "acknowledged": acknowledged(gate),
        "probes": {"run": len(probes), "passing": sum(bool(p.get("passing")) for p in probes)},
        # the RewardMeta `rewards render` wrote (roles and thresholds are decided in one place)
        "rewards": [{"name": m.name, "type": m.type, "role": m.role, "weight": m.weight, "threshold": m.threshold}
                    for m in reward_metas(spec)],
        "variant": licence(run_dir, spec),
        "training": {"method": spec.method, "learning_rate": spec.training.learning_rate, "beta": spec.training.beta,
                     "num_generations": spec.training.num_generations},
        "evaluation": evaluation(run_dir, eval_name, examples),
    }


def _sha256(path: Path) -> str:
    from finetune.hashing import sha256_file

    return sha256_file(path)


# ----------------------------------------------------------------------------------------------
# the card


def _eval_lines(ev: Row | None, examples: bool) -> list[str]:
    if ev is None:
        return ["No held-out evaluation was named (`finetune eval RUN --checkpoint DIR`, then `--eval NAME`)."]
    h = ev["heldout"]
    lines = [f"`finetune eval` on {h['prompts']} held-out prompts (never trained on, none read in Phase 1) × "
             f"{ev['k']} samples, the gated sampling settings, seed {ev['seed']}; success per reward before (the "
             f"base model) and after, the paired change over prompts with its {ev['results']['accept']['level']:.0%} "
             "bootstrap interval and an exact sign test:", "",
             "| measure | before | after | change [interval] | sign test p |", "|---|---|---|---|---|"]
    for key, r in ev["results"].items():
        scale, unit = (100, " pts") if key != "total" else (1, "")
        lo, hi = r["interval"] or [float("nan")] * 2
        lines.append(f"| {key} | {r['before']:.3f} | {r['after']:.3f} | {r['change'] * scale:+.1f}{unit} "
                     f"[{lo * scale:+.1f}, {hi * scale:+.1f}] | {r['p_sign_test']:.3g} |")
    flags = [f["id"] for f in ev["hacking"]["after"]["flags"]]
    probes = [p["probe"] for p in ev["hacking"]["after"]["probes_passing"]]
    lines += ["", f"Reward-hacking checks on the trained model's answers: red flags {', '.join(flags) or 'none'}; "
              f"probe-shaped answers passing {', '.join(probes) or 'none'}."]
    if examples:
        lines += ["", "Examples of the trained model's held-out answers (the person asked for them: `--examples`):", ""]
        lines += [f"- {json_text(s.get('prompt'))} → {json_text(s.get('completion'))}" for s in ev.get("examples", [])]
    return lines


def json_text(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "`" + text.replace("`", "'").replace("\n", " ")[:300] + "`"


def card_body(repo: str, spec: RunSpec, prov: Row, *, examples: bool) -> str:
    from finetune.inspect import bounds

    g, rd, v = prov["gate"], prov["reading"], prov["variant"]
    readers = " and ".join(rd["readers"] or []) or "nobody"
    lines = [f"# {repo.split('/')[-1]}", "",
             f"GRPO fine-tune of `{spec.model}` made with llm-finetuning {__version__} (TRL). Its rewards passed a "
             "blind reward-inspection gate before any training: this card carries that gate's record.", "",
             "## How the reward was checked", "",
             f"- Gate: **{g['status']}** at {g['time']}; gate record sha256 `{g['record_sha256']}`.",
             f"- Reading: {rd['read']} samples read (at least {rd['min_read']} required) by {readers} "
             f"({rd['human']} by a person, {rd['agent']} by an agent"
             f"{', confirmed by the person' if rd['confirmation'] else ''}); {rd['agreed']} agreed with the rewards, "
             f"{rd['disagreements']} disagreements.",
             f"- Blind: {rd['blind_statement'] or 'the gate record holds no blind statement'}",
             "- Reward recall / precision bounds: " + ("not recorded by this gate" if not prov["bounds"] else
                                                        "; ".join(bounds.line(b) for b in prov["bounds"])),
             f"- Hack probes: {prov['probes']['run']} run, {prov['probes']['passing']} passing."]
    acks = prov["acknowledged"]
    lines.append("- Red flags acknowledged: " + ("none" if not acks else "; ".join(
        f"`{a['flag']}` — \"{a['reason']}\" ({a['by']}, {a['time']})" for a in acks)))
    lines += ["", "| reward | type | role | weight | pass threshold |", "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['type']} | {r['role']} | {r['weight']} | {r['threshold']} |"
              for r in prov["rewards"]]
    lines += ["", "Files and spec sections the gate binds (sha256):", ""]
    lines += [f"- `{k}`: `{h}`" for k, h in sorted(g["hashes"].items())]
    t = prov["training"]
    lines += ["", "## Training", "",
              f"- Variant: {v['variant']} — licensed by {v['licensed_by']}"
              + (f" ({v['summary']})" if v.get("summary") else "") + ".",
              f"- Method {t['method'] or 'recommended for the target'}, learning rate {t['learning_rate']}, beta "
              f"{t['beta']}, {t['num_generations']} generations per prompt.", "", "## Evaluation", ""]
    lines += _eval_lines(prov["evaluation"], examples)
    return "\n".join(lines) + "\n"


def card_text(repo: str, spec: RunSpec, prov: Row, *, license: str, datasets: list[str], weights: str,
              examples: bool) -> str:
    """The model card: Hub metadata through huggingface_hub's ModelCardData, then the provenance body."""
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(base_model=spec.model if "/" in spec.model and not Path(spec.model).exists() else None,
                         license=license, datasets=datasets or None, tags=TAGS,
                         library_name="peft" if weights == "adapter" else "transformers",
                         pipeline_tag="text-generation")
    card = ModelCard.from_template(data, template_str="---\n{{ card_data }}\n---\n\n{{ body }}",
                                   body=card_body(repo, spec, prov, examples=examples))
    return str(card.content)


# ----------------------------------------------------------------------------------------------
# the weights and the push

# what a model repo needs from a checkpoint folder; optimizer / scheduler / RNG states, trainer_state.json and the
# run's logs stay behind
WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "adapter_model.*", "config.json",
                "adapter_config.json", "generation_config.json", "tokenizer*", "special_tokens_map.json", "vocab.*",
                "merges.txt", "added_tokens.json", "chat_template.*")


def checkpoint_files(checkpoint: Path, weights: str) -> list[str]:
    """The checkpoint's files that go to the repo; refuses a choice the folder cannot give, in one line."""
    if not checkpoint.is_dir():
        raise UserError(f"no such checkpoint folder: {checkpoint}", where="--checkpoint",
                        fix="name the folder train.py saved (RUN/train, or RUN/train/checkpoint-N)")
    adapter = (checkpoint / "adapter_config.json").is_file()
    if weights == "adapter" and not adapter:
        raise UserError(f"{checkpoint} is a full model, not a LoRA adapter", where="--weights",
                        fix="use --weights merged (a full model uploads as it is)")
    names = sorted({p.name for pat in WEIGHT_FILES for p in checkpoint.glob(pat) if p.is_file()})
    if not any(n.endswith((".safetensors", ".bin")) for n in names):
        raise UserError(f"{checkpoint} has no weights (*.safetensors / *.bin)", where="--checkpoint",
                        fix="name a saved checkpoint (trainer.save_model)")
    return names


def stage_weights(checkpoint: Path, weights: str, names: list[str], out: Path) -> None:
    """The repo's files in ``out``: copied, or an adapter merged into its base model (peft merge_and_unload)."""
    if weights == "merged" and (checkpoint / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model = AutoPeftModelForCausalLM.from_pretrained(str(checkpoint))
        model.merge_and_unload().save_pretrained(str(out))
        AutoTokenizer.from_pretrained(str(checkpoint)).save_pretrained(str(out))
        return
    for name in names:
        shutil.copy2(checkpoint / name, out / name)


def push(api: HubApi, plan: Row, folder: Path) -> Any:
    """Create the repo (private unless the person said --public) and upload ``folder`` in one commit."""
    api.create_repo(plan["repo"], private=plan["private"], exist_ok=True, repo_type="model")
    return api.upload_folder(repo_id=plan["repo"], folder_path=str(folder), repo_type="model",
                             commit_message=f"llm-finetuning {__version__}: gate {plan['gate_status']} "
                                            f"(gate record sha256 {plan['gate_record_sha256'][:12]})")


def publish(run: str | Path, repo: str, *, checkpoint: str | None = None, eval_name: str | None = None,
            public: bool = False, weights: str = "merged", license: str, datasets: list[str] | None = None,
            examples: int = 0, dry_run: bool = False, api: HubApi | None = None) -> tuple[Row, Path]:
    """Write RUN/publish/<owner>--<name>/ (the card, the plan) and, unless ``dry_run``, push with the person's
    token (huggingface_hub's saved login or HF_TOKEN). Returns (the plan, that folder)."""
    from finetune.spec import load_spec

    spec_file, run_dir = rundir.resolve(run)  # the run first: the first error names what the person passed first
    if spec_file is None:
        raise UserError(f"no {rundir.SPEC} in {run}", fix="pass the run directory (or its spec.yaml)")
    spec = load_spec(spec_file)
    if not REPO_ID.fullmatch(repo):
        raise UserError(f"{repo!r} is not a Hub repo id", where="--repo", fix="name it OWNER/NAME (e.g. me/my-model)")
    ckpt = Path(checkpoint).expanduser() if checkpoint else run_dir / rundir.TRAIN_DIR
    names = checkpoint_files(ckpt, weights)
    prov = provenance(run_dir, spec, eval_name, examples)
    card = card_text(repo, spec, prov, license=license, datasets=list(datasets or []), weights=weights,
                     examples=bool(examples))
    plan = {"repo": repo, "private": not public, "weights": weights, "checkpoint": str(ckpt.resolve()),
            "files": names + [CARD], "gate_status": prov["gate"]["status"],
            "gate_record_sha256": prov["gate"]["record_sha256"], "evaluation": eval_name, "dry_run": dry_run,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "pushed": None}
    if not dry_run:
        with tempfile.TemporaryDirectory(prefix="finetune-publish-") as tmp:
            stage_weights(ckpt, weights, names, Path(tmp))
            (Path(tmp) / CARD).write_text(card, encoding="utf-8")
            if api is None:
                from huggingface_hub import HfApi

                api = HfApi()  # the person's token: their saved login or HF_TOKEN
            info = push(api, plan, Path(tmp))
            plan["pushed"] = {"commit": str(getattr(info, "oid", "") or info)}
    return plan, _write(run_dir, repo, card, plan)


def _write(run_dir: Path, repo: str, card: str, plan: Row) -> Path:
    from finetune.commit import staged_dir

    target = run_dir / PUBLISH_DIR / repo.replace("/", "--")
    with staged_dir(target, keep=lambda n: False) as tmp:
        (tmp / CARD).write_text(card, encoding="utf-8")
        jsonio.write_json(tmp / PLAN, plan)
    return target
