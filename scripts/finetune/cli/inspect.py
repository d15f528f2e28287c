"""`finetune inspect <verb>`: Phase 1 — sample, score, review, verdict, confirm, ack, gate.

Every verb works on a run directory (or a spec whose folder is the run directory); every file is
written atomically; bad input is one line and exit 2; a gate FAIL is exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import rundir
from finetune.cli import Verb
from finetune.cli.argtypes import count, real
from finetune.errors import CheckFailed, UserError
from finetune.inspect.sample_remote import SAMPLE_FORMATS

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.inspect.gaterecord import Disagreement, GateRecord
    from finetune.spec import RunSpec


# The verbs' arguments; VERBS at the end names these and the handlers below (the parser it passes is the verb's).
def sample_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class, p.description = argparse.RawDescriptionHelpFormatter, SAMPLE_FORMATS
    p.add_argument("spec", help="run spec (spec.yaml) or run directory")
    p.add_argument("-o", "--out", help="run directory (default: the spec's folder)")
    p.add_argument("--import", dest="import_file", metavar="FILE", help="import completions from a JSONL")
    p.add_argument("--import-base", metavar="FILE", help="import base-success completions from a JSONL")
    p.add_argument("--base-temperature", type=real(0, 100, above=True), default=None, metavar="T",
                   help="with --import-base: the temperature those samples were drawn at (unknown → provisional)")
    p.add_argument("--emit-requests", action="store_true",
                   help="no GPU here: write RUN/requests/ (the exact prompts + sample_vllm.py) to sample elsewhere")
    p.add_argument("--no-base", action="store_true", help="skip the base-success sampling")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=["auto", "transformers", "vllm"], default="auto")
    p.add_argument("--model", metavar="CHECKPOINT",
                   help="re-sample Phase 1's prompts (same settings) from a trained checkpoint (folder or hub id) "
                        "into RUN/inspect/checkpoints/NAME/; run score/review/verdict/gate on that folder")
    p.add_argument("--name", help="with --model: the sample set's folder name (default: the checkpoint's name); "
                                  "with --import FILE: import completions sampled elsewhere into that set")


def score_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory (or its spec.yaml)")


def review_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--format", choices=["md", "html", "terminal"], default="md")
    p.add_argument("--key", action="store_true",
                   help="write review_key.md (scores, flags, agreement) — open it only after recording verdicts")
    p.add_argument("-n", type=count(1, 100000), default=None,
                   help="samples to select (default: all when ≤ 100 are scored, else 100 stratified)")
    p.add_argument("--fresh", action="store_true",
                   help="after a reward fix: switch the reading to the samples held back at sampling "
                        "(inspection.held_back_prompts), a blind set the fixed reward was not tuned on; then write "
                        "the sheet")


def verdict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--id", help="sample id")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--accept", dest="accept", action="store_true", default=None)
    g.add_argument("--reject", dest="accept", action="store_false")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--correct", dest="correct", action="store_true", default=None)
    g.add_argument("--incorrect", dest="correct", action="store_false")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--well-formed", dest="well_formed", action="store_true", default=None)
    g.add_argument("--malformed", dest="well_formed", action="store_false")
    p.add_argument("--note", default="")
    p.add_argument("--file", help="JSONL of verdicts, one per sample (the agent's whole reading); validated in full, "
                                  "then recorded atomically")
    p.add_argument("--reader", choices=["agent"],
                   help="who read: always the agent on this path (a person's verdicts: `inspect human-verdict`)")


def _yes_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true",
                   help="record what the command shows without asking (the person, after reading it); without a "
                        "terminal the command shows it and records nothing unless --yes is given")


def human_verdict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--file", required=True, help="review.html's export (its button x): the person's verdicts, bound "
                                                  "to the page and the samples it showed")
    p.add_argument("--user", help="the person who read (default: this login's name)")
    _yes_argument(p)


def confirm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--user", required=True, help="name of the person confirming")
    p.add_argument("--statement", help="what the user checked")
    _yes_argument(p)


def ack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("flag", help="flag id from the score report, e.g. constant_reward:correctness")
    p.add_argument("--reason", required=True)
    p.add_argument("--by", help="who acknowledges it")
    _yes_argument(p)


def gate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")


def verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")


def compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("set", help="RUN/inspect/checkpoints/NAME")


def _run_dir_and_spec(arg: str, out: str | None = None) -> tuple[RunSpec, Path]:
    from finetune.spec import load_spec

    run = rundir.run_of(Path(arg)) if out is None else None
    if run is not None:  # a checkpoint sample set: the run's spec, the set's files
        rundir.resolve(run)  # finish or clear what a crashed commit left, as every verb does
        return load_spec(run / rundir.SPEC), Path(arg)
    spec_path, run_dir = rundir.resolve(arg, out)
    if spec_path is None:
        raise UserError(f"no {rundir.SPEC} in {arg}", where=arg, fix="pass the run directory that holds spec.yaml")
    return load_spec(spec_path), run_dir


def _cmd(*args: Any) -> str:
    from finetune.inspect.review import command

    return command(*args)


def next_line(console: Console, text: str) -> None:
    """A ``next:`` line unwrapped (paths and commands are copied from it; the terminal folds long lines)."""
    console.print("next: " + text, markup=False, highlight=False, soft_wrap=True)


def _console() -> Console:
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _sample(args: argparse.Namespace) -> int:
    from finetune.inspect import sample

    spec, run_dir = _run_dir_and_spec(args.spec, args.out)
    if args.base_temperature is not None and not args.import_base:
        raise UserError("--base-temperature describes imported base samples", where="--base-temperature",
                        fix="use it with --import-base FILE")
    if args.base_temperature is not None and not args.base_temperature > 0:
        raise UserError(f"--base-temperature {args.base_temperature} is not positive", where="--base-temperature",
                        fix="give the sampling temperature, e.g. 0.3")
    console = _console()
    if args.model is not None or args.name is not None:
        return _sample_checkpoint(args, spec, run_dir, console)  # a set of its own; Phase 1 untouched
    if args.emit_requests:
        return _emit(args, spec, run_dir, console)
    info = sample.run_sample(spec, run_dir, import_file=args.import_file, import_base=args.import_base,
                             base=not args.no_base, device=args.device, backend=args.backend, console=console,
                             base_temperature=args.base_temperature)
    wrote = ([f"{info['samples']} samples to {run_dir / rundir.SAMPLES}"] if "samples" in info else []) + (
        [f"{info['base_samples']} base-success samples to {run_dir / rundir.BASE_SAMPLES}"]
        if info.get("base_samples") else [])
    console.print("wrote " + " and ".join(wrote), markup=False)
    if info.get("truncated"):
        console.print(f"{info['truncated']} of {info['samples']} completions stopped at max_completion_length "
                      f"({spec.generation.max_completion_length} tokens)")
    if info.get("samples", spec.inspection.min_read) < spec.inspection.min_read:
        console.print(f"warning: {info['samples']} samples, but the gate needs {spec.inspection.min_read} read; "
                      "raise inspection.prompts or inspection.per_prompt")
    next_line(console, _cmd("inspect", "score", run_dir))
    return 0


def _sample_checkpoint(args: argparse.Namespace, spec: RunSpec, run_dir: Path, console: Console) -> int:
    from finetune.inspect import checkpoint

    if args.model is None and args.import_file is None:
        raise UserError("--name names a checkpoint's sample set", where="--name",
                        fix="use it with --model CHECKPOINT (sample here) or --import FILE (sampled elsewhere)")
    if args.import_file is not None and args.name is None:
        raise UserError("--model with --import records completions of that checkpoint as a set", where="--import",
                        fix="name the set: --name NAME")
    clash = [o for o, given in (("--import-base", args.import_base), ("--emit-requests", args.emit_requests),
                                ("--no-base", args.no_base), ("-o", args.out)) if given]
    if clash:
        raise UserError(f"a checkpoint's sample set has no base samples; {clash[0]} does not apply to it",
                        where=clash[0], fix="run `finetune inspect sample RUN --model CHECKPOINT [--name NAME]` "
                        "or `--import FILE --name NAME` alone")
    if args.import_file is not None:
        info = checkpoint.import_set(spec, run_dir, args.import_file, args.name, args.model)
        console.print(f"imported {info['samples']} samples into {info['dir']}"
                      + ("" if info["same_prompts_as_phase1"] else " (not Phase 1's prompts and ids: the "
                         "comparison is per reward, not per prompt)"), markup=False)
    else:
        info = checkpoint.sample_checkpoint(spec, run_dir, args.model, name=args.name, device=args.device,
                                            backend=args.backend, console=console)
        console.print(f"wrote {info['samples']} samples of {args.model} on Phase 1's {len(info['prompts'])} "
                      f"prompts to {info['dir']} (settings: {info['settings_from']})", markup=False)
    if info["truncated"]:
        console.print(f"{info['truncated']} of {info['samples']} completions stopped at max_completion_length "
                      f"({info['generation']['max_completion_length']} tokens)")
    next_line(console, _cmd("inspect", "score", info["dir"]) + ", then review, verdict and gate on that folder "
              "(Phase 1's files are untouched)")
    return 0


def _emit(args: argparse.Namespace, spec: RunSpec, run_dir: Path, console: Console) -> int:
    from finetune.inspect import sample_remote

    if args.import_file or args.import_base:
        raise UserError("--emit-requests writes requests; --import reads completions", where="--emit-requests",
                        fix="emit first, sample on the GPU machine, then run again with --import")
    info = sample_remote.emit_requests(spec, run_dir, spec_path=args.spec, base=not args.no_base)
    console.print(f"wrote {info['prompts']} prompts ({info['samples']} samples) and {info['base_prompts']} "
                  f"base-success prompts ({info['base_samples']} samples) to {info['dir']}")
    next_line(console, f"copy {info['dir']} to the GPU machine and follow its README.md; then\n"
              f"  {info['import_command']}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from finetune.inspect import checkpoint, score

    spec, run_dir = _run_dir_and_spec(args.run)
    console = _console()
    if rundir.is_set(run_dir):  # a checkpoint set judges the reward the run trains with, as it is now
        refreshed = checkpoint.sync_rewards(run_dir)
        if refreshed:
            console.print(f"reward files copied from the run: {', '.join(refreshed)}", markup=False)
    report = score.score_run(run_dir, spec, console)
    score.print_report(report, console)
    console.print(f"wrote {run_dir / rundir.SCORED} and {run_dir / rundir.SCORE_REPORT}")
    next_line(console, _cmd("inspect", "review", run_dir) + " (or --format html|terminal)")
    return 0


def _review(args: argparse.Namespace) -> int:
    from finetune.inspect import review

    spec, run_dir = _run_dir_and_spec(args.run)
    console = _console()
    if args.fresh:
        if args.key:
            raise UserError("--fresh starts a new blind reading; --key shows the rewards' view", where="--fresh",
                            fix="switch with --fresh, read and record the verdicts, then write the key")
        from finetune.inspect import readingset

        doc, short = readingset.switch_to_fresh(run_dir, spec)
        console.print(f"the reading is now the {len(doc.ids)} held-back samples no one has seen (recorded in "
                      f"{run_dir / readingset.FILE}); verdicts on them, given before their key, are a blind reading "
                      "of the reward as it is now" + (f" — {short} short of inspection.min_read: re-sample "
                                                       "for more" if short else ""), markup=False)
        console.print(readingset.earlier_statement(run_dir, doc.ids), markup=False)
    if args.key:
        from finetune.inspect import reviewkey

        path, unread = reviewkey.write_key(run_dir, spec, n=args.n)
        console.print(f"wrote {path}" + (f" ({unread} sample(s) on the sheet have no verdict yet: a verdict given "
                                         "after reading the key is not blind, and the gate says so)" if unread else ""),
                      markup=False)
        return 0
    if args.format == "terminal":
        if not on_a_terminal():
            raise UserError("the terminal review records a person's verdicts and reads them from a terminal; "
                            "stdin or stdout is not one", where="--format terminal",
                            fix="the person runs it in their own terminal; an agent records its reading with "
                                "`finetune inspect verdict RUN --file reading.jsonl --reader agent`")
        import getpass

        review.terminal_review(run_dir, spec, console, n=args.n, by=getpass.getuser())
        return 0
    path = review.write_review(run_dir, spec, args.format, n=args.n)
    console.print(f"wrote {path}", markup=False)
    if args.format == "html":
        console.print("open it in a browser, read, press x to export verdicts.jsonl, then the person runs it "
                      "themselves: " + review.command("inspect", "human-verdict", run_dir, "--file",
                                                      "verdicts.jsonl"), markup=False)
    else:
        console.print("read it blind, record the verdicts, then: "
                      + review.command("inspect", "review", run_dir, "--key"), markup=False)
    return 0


def on_a_terminal() -> bool:
    """Are stdin and stdout a terminal? An agent's Bash tool gives neither, but a pty wrapper (`script`, `expect`)
    does: this is no proof of a person. What keeps the agent out of the person's commands is the plugin's hook
    (hooks/guard.py denies them, and `--format terminal`, to the agent's Bash) and the person's key they sign with;
    tests emulate a person here."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def person_approves(lines: list[str], yes: bool, what: str) -> None:
    """Show the person what their command will record; go on only on their yes (typed on their terminal, or
    ``--yes`` on the command line they typed after reading these lines). Otherwise nothing is recorded (exit 2)."""
    for line in lines:
        print(line)
    if yes:
        return
    if on_a_terminal():
        try:
            answer = input(f"record {what}? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() in ("y", "yes"):
            return
        raise UserError(f"{what} not recorded: the answer was not yes", where=what, fix="run it again to record it")
    raise UserError(f"nothing recorded: {what} records a person's act, after they read the lines above", where="--yes",
                    fix="the person runs the same command again with --yes (in their own terminal or Claude Code's "
                        "`!` mode; the plugin's hook refuses it to the agent)")


def _verdict(args: argparse.Namespace) -> int:
    """`verdict`: the agent's reading (pre-approved), recorded as the agent's whatever a file says."""
    from finetune.inspect import verdicts as V

    spec, run_dir = _run_dir_and_spec(args.run)
    if args.file:
        if args.id or args.accept is not None:
            raise UserError("give either --file or --id with --accept/--reject, not both", where=args.verb,
                            fix="record a file of verdicts, or one verdict")
        # a whole reading in one call: every line validated (and every id checked) before one atomic write
        new = V.parse_verdicts(Path(args.file), reader=None if not args.reader else "agent", unique=True)
        if not new:
            raise UserError("no verdicts in the file", where=args.file, fix="write one JSON object per sample")
        source = args.file
    else:
        if not args.id or args.accept is None or not args.reader:
            raise UserError("one verdict needs --id, --accept or --reject, and --reader", where=args.verb,
                            fix="e.g. finetune inspect verdict RUN --id p0001-s00 --reject --incorrect --note "
                                "'wrong sum' --reader agent")
        new = [V.Verdict(id=args.id, accept=args.accept, correct=args.correct, well_formed=args.well_formed,
                         note=args.note, reader="agent")]
        source = "--id"
    declared = sum(v.reader == "human" for v in new)
    path = V.record_verdicts(run_dir, new, source, via=V.AGENT_PATH)
    total = len(V.load_verdicts(run_dir))
    print(f"recorded {len(new)} verdict(s) of the agent in {path} ({total} in all)")
    if declared:
        print(f"{declared} line(s) say reader 'human' but `inspect verdict` records the agent's reading: a person's "
              f"verdicts come from their own reading (review.html's export, recorded by the person with "
              f"{_cmd('inspect', 'human-verdict', run_dir, '--file', 'verdicts.jsonl')}), or the person confirms "
              "this reading")
    return 0


def _human_verdict(args: argparse.Namespace) -> int:
    """`human-verdict`: the person records their page export, after seeing what it records (signed)."""
    import getpass

    from finetune.inspect import personact
    from finetune.inspect import verdicts as V

    spec, run_dir = _run_dir_and_spec(args.run)
    new = V.parse_verdicts(Path(args.file), unique=True)
    if not new:
        raise UserError("no verdicts in the file", where=args.file, fix="export them from review.html (x)")
    page = personact.check_export(run_dir, new, args.file)
    by = (args.user or "").strip() or getpass.getuser()
    person_approves(personact.verdict_lines(run_dir, new, by, args.file, page), args.yes, "these verdicts")
    path = V.record_verdicts(run_dir, [v.model_copy(update={"reader": "human"}) for v in new], args.file,
                             via="human-verdict", by=by)
    print(f"recorded {len(new)} verdict(s) of {by} in {path} ({len(V.load_verdicts(run_dir))} in all), signed with "
          "the person's key")
    return 0


def _confirm(args: argparse.Namespace) -> int:
    from finetune.inspect import gate, personact
    from finetune.inspect import verdicts as V

    spec, run_dir = _run_dir_and_spec(args.run)
    if not args.user.strip():
        raise UserError("empty --user", where="--user", fix="give the name of the person confirming")
    if not V.load_verdicts(run_dir):
        raise UserError(f"no verdicts in {run_dir}", fix="record verdicts with `finetune inspect verdict` first")
    shown = personact.confirm_lines(gate.evaluate(run_dir, spec, rescore=False))
    person_approves(shown, args.yes, "this confirmation")
    path = V.confirm(run_dir, args.user, args.statement, shown)
    print(f"recorded {args.user}'s confirmation in {path}, signed with the person's key")
    return 0


def _ack(args: argparse.Namespace) -> int:
    from finetune.inspect import personact, score
    from finetune.inspect import verdicts as V

    spec, run_dir = _run_dir_and_spec(args.run)
    report = score.load_report(run_dir)
    probes = [p["id"] for p in report["probes"]]
    flag = V.check_ack(args.flag, args.reason, args.by, report["flags"], probes)
    person_approves(personact.ack_lines(flag, args.reason, (args.by or "unknown").strip()), args.yes,
                    "this acknowledgement")
    path = V.acknowledge(run_dir, args.flag, args.reason, args.by, report["flags"], probes)
    print(f"acknowledged {args.flag} in {path}, signed with the person's key")
    return 0


def _gate(args: argparse.Namespace) -> int:
    from finetune.inspect import checkpoint, gate

    spec, run_dir = _run_dir_and_spec(args.run)
    in_set = rundir.is_set(run_dir)
    drift = checkpoint.reward_drift(run_dir) if in_set else []
    extra = [f"the run's reward files changed since this set was scored ({', '.join(drift)}); re-run "
             f"`finetune inspect score {run_dir}`"] if drift else []
    set_gate = checkpoint.gate_set(run_dir, spec, extra) if in_set else None  # gate + comparison: one commit
    record = set_gate.record if set_gate else gate.run_gate(run_dir, spec)
    not_blind = record.blind is not None and not record.blind.reading_blind
    _print_gate(record)
    base = record.base_success or {}
    if set_gate:  # the checkpoint's success is the comparison's, not a base-success verdict
        if set_gate.comparison is not None:
            _print_comparison_lines(run_dir, set_gate.comparison)
        elif set_gate.error is not None:  # the gate's verdict stands; only the comparison is missing
            print(f"no comparison with Phase 1: {set_gate.error.line()}")
    elif base.get("verdict"):
        print(f"base success: {base['verdict']}" + (f" (PROVISIONAL: {'; '.join(base['missing'])})"
                                                     if base.get("provisional") else ""))
    if not_blind and not in_set:
        from finetune.inspect import readingset

        print("for a blind reading of the reward as it is now, " + readingset.fresh_offer(run_dir))
    if record.status != "PASS":
        for r in record.reasons:
            print(f"  - {r}", file=sys.stderr)
        raise CheckFailed(f"gate FAIL: {run_dir / rundir.GATE}")
    print(f"gate PASS{' (not a blind reading: see above)' if not_blind else ''}: {run_dir / rundir.GATE}")
    return 0


def _print_gate(record: GateRecord) -> None:
    """The judgement's lines: blindness first, counts, disagreements, the bounds per reward, replaced verdicts, the
    paths verdicts took."""
    from finetune.inspect import bounds, gate

    blind, c = record.blind, record.counts
    if blind is not None and not blind.reading_blind:  # first: a PASS on a reading that was not blind says so
        print(f"{record.status} on a reading that was NOT BLIND: {blind.statement}")
    if c is not None:
        print(f"read {blind.reading_read if blind else c.read}/{c.min_read} required, {c.disagreements} "
              f"disagreement(s), {sum(f['status'] == 'open' for f in record.flags)} open flag(s), "
              f"{sum(bool(p['passing']) for p in record.probes)} passing probe(s)")
    _print_some(record.disagreements, 20, _disagreement_line)
    for b in record.bounds:
        print(bounds.line(b.model_dump()))
    if record.gated_agreements:
        print(f"{len(record.gated_agreements)} correct-but-malformed sample(s) count as agreement: the "
              "correctness reward is gated on format, so it gives malformed output no credit by design")
        _print_some(record.gated_agreements, 10, lambda g: f"  {g.id}: {g.reward} = {g.score}")
    replaced = [h for h in record.history if h.replaced_disagreements]
    if replaced:
        print(f"{len(replaced)} sample(s) had a disagreement with the rewards that a later verdict replaced (history "
              f"in gate.json): {gate.listing([h.id for h in replaced])}")
    if record.paths is not None:
        print("verdicts by path: " + ", ".join(f"{k} {n}" for k, n in record.paths.counts.items())
              + (f"; {len(record.paths.human_declared_not_established)} say a person read them without the "
                 "person's signature (counted as the agent's)" if record.paths.human_declared_not_established else ""))
    if record.samples is not None and record.samples.source == "imported":
        print(f"the samples are IMPORTED from {record.samples.file}"
              + ("" if record.samples.agent_writable is False else " (a file the agent's tools can write)"))
    if blind is None:
        return
    if blind.earlier_readings:
        print(f"{blind.earlier_readings} verdict(s) of an earlier reading still count for disagreements")
    for ids, what in ((blind.judged_after_reveal, "verdict(s) recorded after the reader saw the rewards"),
                      (blind.changed_after_reveal, "verdict(s) changed after the reveal")):
        if ids:
            print(f"{len(ids)} {what}: {gate.listing(ids)}")
    if blind.mirrors_rewards:
        print("the reading equals the rewards' view on every sample, field for field, with no note: nothing shows "
              "it was read blind (scored.jsonl is readable) - whoever confirms it should judge a few samples "
              "themselves")


def _verify(args: argparse.Namespace) -> int:
    """Does the gate PASS still hold, and was config/ rendered from the person's acts as they are now? (the plugin's
    hook asks before it lets the agent launch a run)"""
    from finetune.inspect import gate

    spec, run_dir = _run_dir_and_spec(args.run)
    check = gate.verify_gate(run_dir, spec)
    if not check.ok:
        raise CheckFailed(check.reason)
    void = gate.render_void(run_dir)
    if void:
        raise CheckFailed(void)
    print(f"gate PASS holds and config/ was rendered from it: {run_dir}")
    return 0


def _compare(args: argparse.Namespace) -> int:

    spec, set_path = _run_dir_and_spec(args.set)
    if not rundir.is_set(set_path):
        raise UserError(f"{args.set} is not a checkpoint sample set", where=args.set,
                        fix="give RUN/inspect/checkpoints/NAME (made by `finetune inspect sample RUN --model CKPT`)")
    _print_comparison(set_path, spec)
    return 0


def _print_comparison(set_path: Path, spec: RunSpec) -> None:
    from finetune.inspect import checkpoint

    _print_comparison_lines(set_path, checkpoint.write_comparison(set_path, spec))


def _print_comparison_lines(set_path: Path, c: dict[str, Any]) -> None:
    from finetune.inspect import checkpoint

    print("\n".join(checkpoint.comparison_lines(c)))
    print(f"wrote {set_path / checkpoint.COMPARISON_MD} and {set_path / checkpoint.COMPARISON}")


def _disagreement_line(d: Disagreement) -> str:
    kind = "false positive (reward-hacking risk)" if d.kind == "false_positive" else "false negative (lost signal)"
    note = f" — note: {d.note}" if d.note else ""
    return f"  {d.id}: {kind} on {d.field} — rewards {', '.join(d.rewards)} {d.scores}{note}"


def _print_some(items: list[Any], limit: int, line: Callable[[Any], str]) -> None:
    """Print up to ``limit`` items; a longer list ends with how many more gate.json holds."""
    for item in items[:limit]:
        print(line(item))
    if len(items) > limit:
        print(f"  and {len(items) - limit} more — see gate.json")


# verb -> its arguments and handler (finetune.cli.verbs reads this; the order is --help's)
VERBS = {
    "sample": Verb(sample_arguments, _sample, "generate completions (and base-success samples), or import them"),
    "score": Verb(score_arguments, _score, "run rewards.py on every sample; flags, probes, base success"),
    "review": Verb(review_arguments, _review, "write the blind reading sheet (md, html) or review in the terminal; "
                   "--key: the rewards' view, after the verdicts"),
    "verdict": Verb(verdict_arguments, _verdict,
                    "record the agent's verdicts (one, or a JSONL file) — never edit JSON by hand"),
    "human-verdict": Verb(human_verdict_arguments, _human_verdict, "record a person's verdicts (review.html's "
                          "export) after showing what it records — run by the person; the plugin's hook refuses it "
                          "to an agent"),
    "confirm": Verb(confirm_arguments, _confirm,
                    "the person confirms the agent's reading (needed for an agent-only reading), after seeing it"),
    "ack": Verb(ack_arguments, _ack, "the person acknowledges a red flag with a written reason (probes cannot be "
                "waived)"),
    "gate": Verb(gate_arguments, _gate, "PASS/FAIL: write gate.json (exit 0 PASS, 1 FAIL)"),
    "verify": Verb(verify_arguments, _verify, "does the gate PASS still hold, and config/ rest on it? (exit 0 yes, "
                   "1 no; writes nothing)"),
    "compare": Verb(compare_arguments, _compare, "a checkpoint sample set against Phase 1: agreement and success "
                    "per reward, new disagreements (comparison.md)"),
}
