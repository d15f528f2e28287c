"""The digit task's report: report.md (templates/demo-report.md.j2), report.html and demo.json.

Every value the template shows is prepared here from the demo's facts (:class:`finetune.demo.runner.DemoResult`),
with a link to every artefact relative to the demo folder; a link is drawn only to a file that exists.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from finetune import atomic, jsonio, literals, rundir
from finetune.demo.runner import CHECKER_USER, DemoResult
from finetune.demo.train import EARLY_STEPS


def _link(out: Path, rel: str) -> str:
    return f"[`{rel}`]({rel})" if (out / rel).exists() else f"`{rel}` (not written)"


def _artefacts(out: Path) -> list[tuple[str, list[str]]]:
    def existing(base: str, names: list[str]) -> list[str]:
        return [f"{base}/{n}" if base else n for n in names if (out / base / n).exists()]

    good = ["spec.yaml", "route.json", "rewards.py", "samples.jsonl", "base_samples.jsonl", "sample_info.json",
            "scored.jsonl", "score_report.json", "review.md", "review.html", "checker_verdicts.jsonl", "verdicts.jsonl",
            "confirmation.json", "gate.json", "memory.md", "config/BRIEF.md", "config/grpo_config.yaml",
            "config/train.py", "config/launch.sh", "heldout.json", "diagnosis/diagnosis.json",
            "diagnosis/report.md", "diagnosis/curves.png"]
    trains = sorted(p.name for p in (out / "pass").glob(f"{rundir.TRAIN_DIR}*") if p.is_dir())
    train_files = [f"{t}/{n}" for t in trains for n in ("trainer_state.json", "demo_profile.json",
                                                            "inspections/index.jsonl", "STOPPED.json")]
    bad = ["spec.yaml", "rewards.py", "samples.jsonl", "scored.jsonl", "score_report.json", "review.md",
           "checker_verdicts.jsonl", "verdicts.jsonl", "confirmation.json", "gate.json"]
    logs = sorted(f"logs/{p.name}" for p in (out / "logs").glob("*.log"))
    return [("task and model", existing("", ["data/train.jsonl", "data/heldout.jsonl", "model/DEMO_MODEL.json",
                                             "model/config.json"])),
            ("PASS run (`pass/`)", existing("pass", good + train_files)),
            ("FAIL run (`fail/`, the broken reward)", existing("fail", bad)),
            ("stage logs", logs)]


def _example_cell(example: dict[str, Any]) -> str:
    text = example["completion"].replace("`", "'").replace("\n", " ")
    shown = f"`{text}`" if text.strip() else "(empty)"
    return f"{shown} — {example['checker']}".replace("|", "\\|")


def _cell(text: str) -> str:
    """Demo-made text (a stage's detail, a command) inside a table cell: one line, pipes escaped."""
    return text.replace("|", "\\|").replace("\n", " ")


def _phase_rows(result: DemoResult) -> list[dict[str, str]]:
    return [{"name": p.name, "status": p.status, "seconds": f"{p.seconds:.1f}",
             "detail": _cell(p.detail or (f"`{p.command}`" if p.command else "")),
             "log": f"[log]({p.log})" if p.log and (result.out / p.log).exists() else ""} for p in result.phases]


def _model_facts(f: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The task and model section, and the base-success line under it."""
    model = base = None
    if "model" in f:
        m = f["model"]
        model = {"task": m["task"], "train_prompts": m["train_prompts"], "steps": m["recipe"]["steps"],
                 "mix": "; ".join(f"{tier} prompts (first digit {'/'.join(firsts)}): "
                                  + ", ".join(f"{k} {v:.0%}" for k, v in mix.items())
                                  for tier, (firsts, mix) in m["recipe"]["tiers"].items()),
                 "seconds": m["seconds"]}
    if "base_success" in f:
        b = f["base_success"]
        base = {"samples": b["samples"], "temperature": b["temperature"], "mean": f"{b['mean_success']:.0%}",
                "verdict": b["verdict"], "sampled": f"{f.get('sampled_success', 0):.0%}"}
    return model, base


def _gate_facts(f: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The PASS gate of pass/ and the FAIL gate of fail/ as report.md states them."""
    ok = bad = None
    if "gate_pass" in f:
        g, c = f["gate_pass"], f["gate_pass"]["counts"]
        ok = {"status": g["status"], "read": c["read"], "scored": c["scored"], "min_read": c["min_read"],
              "disagreements": c["disagreements"], "flags": len(g["flags"]),
              "probes_passing": sum(bool(p["passing"]) for p in g["probes"]), "probes": len(g["probes"]),
              "readers": ", ".join(g["readers"]),
              "reader_kind": f.get("checker", {}).get("pass", {}) and "the demo checker" or "the user",
              "confirmed_by": (g.get("confirmation") or {}).get("user", "not needed (human reading)")}
    if "gate_fail" in f:
        g = f["gate_fail"]
        passing = sorted({p["id"].split("@")[0] for p in g["probes"] if p["passing"]})
        bad = {"status": g["status"], "false_positives": sum(d["kind"] == "false_positive" for d in g["disagreements"]),
               "passing": ", ".join(passing) or "none", "reasons": list(g["reasons"])}
    return ok, bad


def _filter_facts(f: dict[str, Any]) -> dict[str, Any] | None:
    """The filter's prediction next to what TRL measured with and without it."""
    if "filter" not in f:
        return None
    flt = f["filter"]
    runs = f.get("heldout", {}).get("runs", []) or [{"seed": "–", "measured_zero_std": None}]
    rows = [{"seed": r["seed"], "measured": _fraction(r.get("measured_zero_std")),
             "early": _fraction(r.get("measured_zero_std_early")),
             "unfiltered": _fraction(r.get("unfiltered_zero_std")),
             "unfiltered_early": _fraction(r.get("unfiltered_zero_std_early")),
             "gain": _fraction(r.get("reward_gain")), "unfiltered_gain": _fraction(r.get("unfiltered_reward_gain"))}
            for r in runs]
    interval = flt.get("predicted_zero_std_after_interval")
    disp = (flt.get("dispersion") or {}).get("index")
    return {**{k: flt[k] for k in ("k", "assessed", "kept", "dropped_never", "dropped_always", "num_generations",
                                  "check_prompts")},
            "before": f"{flt['predicted_zero_std_before']:.3f}", "after": f"{flt['predicted_zero_std_after']:.3f}",
            "in_sample": f"{flt['predicted_zero_std_after_in_sample']:.3f}",
            "interval": f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "n/a",
            "dispersion": "n/a" if disp is None else f"{disp:.2f}",
            "dispersion_words": ("far more than sampling noise alone" if disp and disp >= 2 else
                                 "little beyond sampling noise"),
            "early_steps": EARLY_STEPS, "rows": rows, "outcome": filter_outcome(runs)}


def filter_outcome(runs: list[dict[str, Any]]) -> str:
    """What this machine measured, whichever way it came out — and no more than its seeds can show.

    A seed's zero-std fraction moves with floating point (CPU kernels, thread count), so two seeds cannot
    carry an effect claim; benchmarks/bench_filter.py measures the effect over 8 seeds with a sign test.

    >>> filter_outcome([{"measured_zero_std": 0.3, "unfiltered_zero_std": 0.4},
    ...                 {"measured_zero_std": 0.41, "unfiltered_zero_std": 0.38}])
    'On this machine the filtered run logged fewer zero-std groups than the unfiltered one on 1 of 2 seeds.'
    >>> filter_outcome([{"measured_zero_std": None}])
    'No seed measured both runs.'
    """
    paired = [r for r in runs if r.get("measured_zero_std") is not None and r.get("unfiltered_zero_std") is not None]
    if not paired:
        return "No seed measured both runs."
    lower = sum(r["measured_zero_std"] < r["unfiltered_zero_std"] for r in paired)
    return (f"On this machine the filtered run logged fewer zero-std groups than the unfiltered one on {lower} of "
            f"{len(paired)} seed{'s' if len(paired) != 1 else ''}.")


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _interval(r: dict[str, Any], key: str) -> str:
    """`finetune eval`'s paired change of one measure with its interval, in points ("–" without an evaluation)."""
    got = ((r.get("eval") or {}).get("results") or {}).get(key)
    if not got or not got.get("interval"):
        return "–"
    lo, hi = got["interval"]
    return f"{got['change'] * 100:+.1f} pts [{lo * 100:+.1f}, {hi * 100:+.1f}], sign test p {got['p_sign_test']:.2g}"


def _heldout_facts(out: Path, f: dict[str, Any]) -> dict[str, Any] | None:
    if not f.get("heldout", {}).get("runs"):
        return None
    h = f["heldout"]
    runs = [{"seed": r["seed"], "before": f"{r['before']['reward']:.3f}", "after": f"{r['after']['reward']:.3f}",
             "accept_before": f"{r['before']['checker_accept']:.0%}",
             "accept_after": f"{r['after']['checker_accept']:.0%}", "change": _interval(r, "correct"),
             "link": _link(out, "pass/" + r["output_dir"] + "/trainer_state.json"),
             "eval": _link(out, f"pass/eval/{r['eval']['name']}/report.md") if r.get("eval") else "–"}
            for r in h["runs"]]
    first = h["runs"][0]
    examples = [{"prompt": b["prompt"], "before": _example_cell(b), "after": _example_cell(a)}
                for b, a in zip(first["before"]["examples"], first["after"]["examples"])]
    level = ((first.get("eval") or {}).get("level")) or 0.95
    return {"prompts": h["prompts"], "k": h["k"], "temperature": h["temperature"], "runs": runs,
            "first_seed": first["seed"], "examples": examples, "level": f"{level:.0%}"}


def _inspection_facts(f: dict[str, Any]) -> dict[str, Any] | None:
    """Per toy run (filtered and unfiltered): inspections made, stop rules and live red flags fired, the step
    files; a stop (STOPPED.json) as the callback's decision with its rule and why, never as a demo error."""
    runs = f.get("heldout", {}).get("runs", [])
    found = [(r["seed"], r.get(out_key, ""), r[key]) for r in runs
             for key, out_key in (("inspection", "output_dir"), ("unfiltered_inspection", "unfiltered_output_dir"))
             if key in r]
    if not found:
        return None
    rows, stops = [], []
    for seed, output_dir, rec in found:
        run = f"pass/{output_dir}"
        flags = [f"{flag} (step {', '.join(map(str, steps))})" for flag, steps in rec["flags"].items()]
        rows.append({"run": run, "seed": seed, "inspections": rec["inspections"],
                     "fired": ", ".join(rec["rules_fired"]) or "none", "flags": "; ".join(flags) or "none",
                     "files": [(str(x["step"]), f"pass/{x['path']}") for x in rec["files"]],
                     "index": f"pass/{rec['dir']}/index.jsonl"})
        if rec.get("stopped"):
            stops.append({"run": run, "file": f"{run}/STOPPED.json", **rec["stopped"]})
    every = f.get("inspection_every", {})
    return {"every": every.get("value", "?"), "reason": every.get("reason", ""), "rows": rows, "stops": stops}


def _diagnosis_facts(out: Path, f: dict[str, Any]) -> dict[str, Any] | None:
    if "diagnosis" not in f:
        return None
    d = f["diagnosis"]
    return {"verdict": d["verdict"], "symptoms": ", ".join(d["symptoms"]) or "none",
            "variant": d["recommended_variant"] or "none (stay on GRPO)",
            "curves": (out / "pass/diagnosis/curves.png").exists()}


def report_markdown(result: DemoResult) -> str:
    """report.md (templates/demo-report.md.j2): what ran, what it showed, and a link to every artefact
    (relative to DIR)."""
    out, f = result.out, result.facts
    model, base = _model_facts(f)
    gate_pass, gate_fail = _gate_facts(f)
    changes = [c for c in f.get("profile_changes", []) if c["field"] not in ("output_dir", "seed")]
    env = literals.environment(Path(__file__).resolve().parents[1] / "templates")
    text = env.get_template("demo-report.md.j2").render(
        wall=f.get("wall_seconds", "?"), reader=result.reader, terminal="terminal" in result.reader,
        checker_user=CHECKER_USER, stopped=f.get("stopped_at"), phases=_phase_rows(result), model=model, base=base,
        gate_pass=gate_pass, gate_fail=gate_fail, profile_changes=changes if "profile_changes" in f else None,
        filter=_filter_facts(f), heldout=_heldout_facts(out, f), inspection=_inspection_facts(f),
        diagnosis=_diagnosis_facts(out, f),
        artefacts=[(title, [_link(out, p) for p in paths]) for title, paths in _artefacts(out)])
    return text.rstrip() + "\n"


def report_html(markdown_text: str) -> str:
    """report.html: the same report as a self-contained page (links and the plot are relative)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    style = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}"
             "code{background:#f4f4f4;padding:0 .2rem}img{max-width:100%}blockquote{border-left:4px solid #e0a000;"
             "margin-left:0;padding-left:1rem;background:#fff8e6}")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>finetune demo — report</title>"
            f"<style>{style}</style></head><body>\n{body}</body></html>\n")


def write_report(result: DemoResult) -> None:
    md = report_markdown(result)
    atomic.write_text(result.out / "report.md", md)
    atomic.write_text(result.out / "report.html", report_html(md))
    jsonio.write_json(result.out / "demo.json", {
        "reader": result.reader, "facts": result.facts,
        "phases": [dataclasses.asdict(p) for p in result.phases]})
