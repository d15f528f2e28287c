"""What a diagnosis shows a person: the terminal lines and report.md (read off the diagnosis document) and
curves.png (the logs, with the symptoms' windows shaded), written together."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from finetune import commit, jsonio, rundir
from finetune.diagnose.detectors import detector, symptoms
from finetune.diagnose.logs import (
    K_CLIP_REGION,
    K_CLIPPED,
    K_ENTROPY,
    K_LENGTH,
    K_REWARD,
    STANDING_CAVEAT,
    Logs,
    Series,
)


def terminal_lines(doc: dict[str, Any]) -> list[str]:
    """What `finetune diagnose` prints: verdict, symptoms, the change, the roles it assumed (and how to
    override them) and every caveat that changes the reading (all but STANDING_CAVEAT)."""
    lines = [f"{doc['verdict']}: {doc['headline']}"]
    lines += [f"  - {s['name']}: {s['summary']}" for s in doc["symptoms"]]
    change = doc["recommended_change"]
    if change and change["kwargs"]:
        lines.append("  change: " + ", ".join(f"{k}: {v['from']!r} -> {v['to']!r}"
                                              for k, v in change["kwargs"].items()))
    assumed = doc.get("assumed_roles")
    if assumed:
        named = ", ".join(f"{n} = {r}" for n, r in assumed["roles"].items())
        none = f"no role for {', '.join(assumed['unassumed'])}" if assumed["unassumed"] else ""
        lines.append(f"reward roles assumed from their names: {'; '.join(x for x in (named, none) if x)}"
                     if named else f"reward roles: nothing declares them and no name suggests one ({none})")
        lines.append(f"  override: {assumed['override']}")
    caveats = [c for c in doc["caveats"] if c != STANDING_CAVEAT]
    if caveats:
        lines.append("caveats (they change how to read this diagnosis):")
        lines += [f"  - {c}" for c in caveats]
    return lines


PANELS = ((K_REWARD, "reward (total)"), ("correctness", "correctness reward"), (K_ENTROPY, "entropy (nats/token)"),
          (K_LENGTH, "completion length (tokens)"), (K_CLIPPED, "clip ratio"))


PLOT_LIMIT = 1e100  # matplotlib cannot place ticks on a span that overflows a float (±1e308 losses)


def _plottable(values: Any) -> list[float]:
    """Values as drawn: non-finite ones left out (NaN is a gap), magnitudes clipped to PLOT_LIMIT."""
    return [min(max(float(v), -PLOT_LIMIT), PLOT_LIMIT) if math.isfinite(float(v)) else math.nan for v in values]


def plot(logs: Logs, doc: dict[str, Any], d_correctness: Series | None, path: Path) -> None:
    """reward, correctness reward, entropy, completion length and clip ratio over steps; windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = symptoms()
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(9, 2.1 * len(PANELS)), sharex=True)
    for ax, (key, title) in zip(axes, PANELS):
        s = d_correctness if key == "correctness" else logs.get(key)
        if s is not None:
            ax.plot(s.steps, _plottable(s.values), lw=1.2, marker=".", ms=3, label=s.key)
        r = logs.get(K_CLIP_REGION)
        if key == K_CLIPPED and r is not None:
            ax.plot(r.steps, _plottable(r.values), lw=1, ls="--", label="PPO clip region (clip_ratio/region_mean)")
        if s is None:
            ax.text(0.5, 0.5, "not logged" if key != "correctness" else "no correctness reward identified",
                    transform=ax.transAxes, ha="center", va="center", color="gray")
        for sym in doc["symptoms"]:
            w = sym.get("window")
            if w:
                ax.axvspan(w["from_step"], max(w["to_step"], w["from_step"] + 0.5), alpha=0.15,
                           color=detector(sym["name"]).colour, label=f"{sym['name']}")
        ax.set_ylabel(title, fontsize=8)
        handles, labels = ax.get_legend_handles_labels()
        if handles:  # the shaded windows are named in the first panel only
            uniq = {lab: h for lab, h in zip(labels, handles) if ax is axes[0] or lab not in names}
            ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.suptitle(f"{doc['verdict']}: {doc['headline']}"[:110], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _fmt(v: Any) -> str:
    return "`null`" if v is None else f"`{v}`"


def report_md(doc: dict[str, Any]) -> str:
    """A short Markdown report of the diagnosis (everything it states comes from ``doc``)."""
    run = doc["run"]
    lines = [f"# Diagnosis: {doc['verdict']}", "", f"**{doc['headline']}**", "",
             f"Log: `{run['log']}` — {run['logged_steps']} logged steps ({run['first_step']}–{run['last_step']}). "
             f"Config: {run['config_source'] or 'not found'}. Correctness reward: "
             f"{', '.join(run['correctness_keys']) or 'not identified'}.", ""]
    lines += ["## Symptoms", ""]
    if not doc["symptoms"]:
        lines += ["None.", ""]
    for s in doc["symptoms"]:
        w = s.get("window")
        span = f" (steps {w['from_step']}–{w['to_step']})" if w else ""
        lines += [f"- **{s['name']}**{span}: {s['summary']}"]
    lines += ["", "## Recommendation", ""]
    change = doc["recommended_change"]
    if change is None:
        lines += [f"Stay on `{doc['recommended_variant']}`. No variant is switched "
                  "without its symptom.", ""]
    else:
        lines += [f"One change, against `{change['addresses']}`:", ""]
        if change["kind"] == "variant":
            lines += [f"Switch `variant` to `{change['variant']}` — {change['paper']} (arXiv {change['arxiv']}).", "",
                      change["reason"], ""]
        else:
            lines += [change["action"], ""]
        if change["kwargs"]:
            lines += ["| kwarg | now | then |", "|---|---|---|"]
            for k, v in change["kwargs"].items():
                assumed = " (assumed)" if v.get("from_assumed") else ""
                lines += [f"| `{k}` | {_fmt(v['from'])}{assumed} | {_fmt(v['to'])} |"]
            lines += [""]
    lines += ["## Checks", "", "| check | status | why | remedy when it shows |", "|---|---|---|---|"]
    for c in doc["checks"]:
        lines += [f"| {c['name']} | {c['status']} | {c['why'].replace('|', '/')} | "
                  f"{c.get('remedy', '').replace('|', '/')} |"]
    lines += ["", "## Caveats", ""] + [f"- {c}" for c in doc["caveats"]]
    lines += ["", "![curves](curves.png)", ""]
    return "\n".join(lines)


def write_outputs(out_dir: Path, doc: dict[str, Any], logs: Logs, correctness: Series | None) -> Path:
    """DIR/diagnosis/{diagnosis.json, report.md, curves.png}, all three or none."""
    target = out_dir / rundir.DIAGNOSIS_DIR
    with commit.staged_dir(target) as tmp:
        plot(logs, doc, correctness, tmp / "curves.png")
        (tmp / "report.md").write_text(report_md(doc), encoding="utf-8")
        # an evidence value that overflowed (a ±1e308 loss minus another) is null, not a crash
        (tmp / "diagnosis.json").write_text(jsonio.dumps(doc, indent=2, nonfinite="null") + "\n", encoding="utf-8")
    return target
