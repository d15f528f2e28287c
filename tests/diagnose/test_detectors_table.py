"""Detectors as data: one registry entry per diagnose symptom (its check and its change) and per Phase 1
red flag, from which the checks, the priority, the recommendation, the report, the symptom→variant map and
the generated reference derive. Every entry is driven through the recommendation and the report as a
symptom, and a symptom added exactly as DESIGN.md's recipe says reaches `finetune diagnose`'s output."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from finetune.diagnose import changes, detectors, diagnosis, recommend, reference, report
from finetune.diagnose.context import RunContext
from finetune.diagnose.evidence import Finding, Run
from finetune.diagnose.logs import load_logs
from finetune.inspect import flags
from finetune.variants import VARIANT_SYMPTOM, VARIANTS

ROOT = Path(__file__).resolve().parents[2]


def test_every_detector_owns_its_check_and_its_change():
    names = [d.name for d in detectors.DETECTORS]
    assert len(set(names)) == len(names) and tuple(names) == detectors.symptoms()
    for d in detectors.DETECTORS:
        assert callable(d.check) and callable(d.change), d.name
        assert d.doc.strip() and d.remedy.strip() and "\n" not in d.doc
    # no method names run by getattr, no chain of symptom names deciding the change
    for module in (recommend, diagnosis, report):
        source = Path(module.__file__).read_text()
        assert "getattr(" not in source and not re.search(r"== *(REWARD_HACKING|NAN|KL_BLOWUP|TRUNCATION)", source)


def test_the_symptom_variant_map_lives_in_variants_only():
    assert changes.symptom_variant() == {s: v for v, s in VARIANT_SYMPTOM.items()}
    for variant, symptom in VARIANT_SYMPTOM.items():
        assert symptom in detectors.symptoms() and variant in VARIANTS and variant in changes.PAPERS
        assert variant in detectors.remedy_text(symptom)
        assert detectors.detector(symptom).change is changes.switch_variant
    # a detector switches a variant exactly when its symptom licenses one; reward hacking never does
    assert {d.name for d in detectors.DETECTORS if d.change is changes.switch_variant} == set(VARIANT_SYMPTOM.values())
    assert detectors.REWARD_HACKING not in VARIANT_SYMPTOM.values()
    for module in (detectors, changes, recommend):
        source = Path(module.__file__).read_text()
        assert not re.search(r"ENTROPY_COLLAPSE:\s*\"dapo\"", source), f"a second symptom→variant map in {module}"


# ----------------------------------------------------------------------------------------------
# every entry, firing, through the recommendation and the report

CONFIGS = ({}, {"learning_rate": 1e-3, "max_completion_length": 256, "num_generations": 8,
                "gradient_accumulation_steps": 4})


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> Run:
    """A plain TRL log with nothing wrong in it (12 steps, flat and finite), with no spec or config beside it."""
    folder = tmp_path_factory.mktemp("plain-log")
    rows = [{"step": i, "loss": 0.01, "reward": 0.5 + 0.01 * (i % 3), "entropy": 1.2, "kl": 0.01,
             "completions/mean_length": 40.0 + i % 2, "rewards/accuracy_reward/mean": 0.3} for i in range(1, 13)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    logs = load_logs(folder / "metrics.jsonl")
    return Run(logs, RunContext(folder, named_roles={"accuracy_reward": "correctness"}))


def drive(d: detectors.Detector, run: Run, config: dict, current: str) -> tuple[dict, str, list[str]]:
    """Diagnose ``run`` as if ``d`` alone fired (every other check clear): the document, report.md and the
    terminal lines. An entry without a usable change fails here."""
    findings = [Finding(o.name, "symptom" if o is d else "clear", f"{o.name} (synthesised)")
                for o in detectors.DETECTORS]
    variant, change = recommend.recommended_change(findings, config, current)
    assert change is not None and change["addresses"] == d.name and change["variant"] == variant
    run.ctx.config = config
    doc = diagnosis.diagnosis_document(run, findings)
    return doc, report.report_md(doc), report.terminal_lines(doc)


@pytest.mark.parametrize("name", detectors.symptoms())
def test_every_detector_fires_through_the_recommendation_and_the_report(name, plain_run):
    d = detectors.detector(name)
    for config in CONFIGS:
        for current in VARIANTS:
            doc, md, lines = drive(d, plain_run, dict(config), current)
            change = doc["recommended_change"]
            assert doc["verdict"] == "symptom" and [s["name"] for s in doc["symptoms"]] == [name]
            assert f"One change, against `{name}`:" in md and f"- **{name}**" in md
            assert (change["reason"] if change["kind"] == "variant" else change["action"]) in md
            for k, v in change["kwargs"].items():  # what the change sets is shown in both
                assert f"| `{k}` |" in md and any(f"{k}: {v['from']!r} -> {v['to']!r}" in line for line in lines)
            assert name in lines[0] and lines[0].startswith("symptom: ")


def test_an_incomplete_entry_fails_the_drive(monkeypatch, plain_run):
    """An entry that names a variant switch without a variant licensing its symptom, or a change that says
    nothing to do, does not pass: the drive above would fail for it."""
    no_variant = detectors.Detector("recipe_unlicensed", lambda run: Finding("recipe_unlicensed", "clear", "-"),
                                    changes.switch_variant, "switch", "never")
    silent = detectors.Detector("recipe_silent", lambda run: Finding("recipe_silent", "clear", "-"),
                                lambda f, config, current: {"kind": "health", "addresses": f.name, "kwargs": {},
                                                            "variant": current}, "nothing", "never")
    monkeypatch.setattr(detectors, "DETECTORS", (no_variant, silent, *detectors.DETECTORS))
    with pytest.raises(LookupError, match="VARIANT_SYMPTOM"):
        drive(no_variant, plain_run, {}, "grpo")
    with pytest.raises(KeyError, match="action"):
        drive(silent, plain_run, {}, "grpo")


def test_recommendation_for_hacking_outranks_the_variants():
    shown = [Finding(detectors.LENGTH_DRIFT, "symptom", "drift"),
             Finding(detectors.REWARD_HACKING, "symptom", "hack", {"carrier": "verbosity"})]
    variant, change = recommend.recommended_change(shown, {}, "grpo")
    assert variant == "grpo" and change["kind"] == "reward" and change["reward"] == "verbosity"
    variant, change = recommend.recommended_change(shown[:1], {}, "grpo")
    assert variant == "dr_grpo" and change["kind"] == "variant"


def test_every_red_flag_raised_has_a_table_entry():
    source = Path(flags.__file__).read_text()
    raised = set(re.findall(r'_flag\(\s*"([a-z_]+)"', source))
    assert raised and raised <= set(flags.RED_FLAGS), raised - set(flags.RED_FLAGS)
    assert flags._flag("truncated", None, "m")["remedy"] == flags.RED_FLAGS["truncated"].remedy


def test_generated_reference_lists_every_entry():
    from finetune.docs import REGISTRY

    assert any(t.path == "references/diagnosis.md" and t.producer == "finetune.diagnose.reference:diagnosis_doc"
               for t in REGISTRY)
    doc = reference.diagnosis_doc()
    for d in detectors.DETECTORS:
        assert f"`{d.name}` | {d.doc} | {detectors.remedy_text(d.name)} |" in doc
    for name, flag in flags.RED_FLAGS.items():
        assert f"| `{name}` | {flag.doc} | {flag.remedy} |" in doc


def test_thresholds_are_the_constants_the_checks_read(monkeypatch):
    """diagnosis.json's `thresholds` is derived from DETECTORS: a constant a new check reads is listed with no
    second edit, and the constants the existing checks read through helpers and finetune.watch are there."""
    monkeypatch.setattr(detectors, "RECIPE_LIMIT", 0.42, raising=False)

    def recipe_check(run: Run) -> Finding:
        return Finding("recipe", "clear", f"under {detectors.RECIPE_LIMIT}")

    entry = detectors.Detector("recipe", recipe_check, changes.advice("act"), "remedy", "what it reads")
    monkeypatch.setattr(detectors, "DETECTORS", (*detectors.DETECTORS, entry))
    found = detectors.thresholds()
    assert found["recipe_limit"] == 0.42
    assert {"solved_fraction", "min_plateau_points", "stale_min_gap", "window_fraction", "min_points"} <= set(found)


def test_design_md_lists_every_symptom_in_priority_order():
    """DESIGN.md's list of symptom names is generated from DETECTORS (`finetune docs`), not kept by hand."""
    from finetune import docs

    names = reference.symptom_names()
    assert [n.strip("`") for n in names.strip().split(", ")] == list(detectors.symptoms())
    assert "`stale_vllm_weights`" in names
    target = next(t for t in docs.REGISTRY if t.path == "DESIGN.md" and t.region == "symptoms")
    assert {o.status for o in docs.sync(ROOT, check=True, registry=[target])} == {"ok"}  # + the references TOCs


# ----------------------------------------------------------------------------------------------
# DESIGN.md's recipe, followed in a copy of the package

RECIPE_CHECK = '''

RECIPE_MIN_STEPS = 3  # the recipe's threshold: diagnosis.json lists it with no second edit


def recipe_probe(run: Run) -> Finding:
    if len(run.logs.entries) < RECIPE_MIN_STEPS:
        return Finding("recipe_probe", "not_evaluated", f"fewer than {RECIPE_MIN_STEPS} logged steps")
    return Finding("recipe_probe", "symptom", f"the probe fired on {len(run.logs.entries)} logged steps",
                   {"steps": len(run.logs.entries)}, (run.logs.steps[0], run.logs.steps[-1]))

'''
RECIPE_ENTRY = '''    Detector("recipe_probe", recipe_probe, advice("read the probe's completions and fix what it found"),
             "read what the probe found", "fires on every run (DESIGN.md's recipe, followed in a test)"),
'''


@pytest.mark.slow  # a copy of the repository: fresh interpreters (torch, matplotlib), ruff, mypy, the structure tests
def test_a_symptom_added_as_the_recipe_says_reaches_the_output(tmp_path, plain_run):
    """The recipe's one file, edited in a copy of the repository: one check function reading its own threshold and
    one entry (first, so highest priority). `finetune diagnose` then names the symptom, recommends its change in
    the terminal and report.md, and lists it and its threshold in diagnosis.json; `finetune docs` puts it in
    references/diagnosis.md and DESIGN.md's symptom list; ruff, mypy and the structure tests pass on the copy."""
    from scratch_repo import checks, copy_repo, digests, failed, run

    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    recipe = design[design.index("### A diagnose symptom"):design.index("### A CLI verb")]
    assert "- Files: `scripts/finetune/diagnose/detectors.py`\n" in recipe and "`Detector(name, check, change" in recipe
    root = copy_repo(tmp_path / "repo")
    before = digests(root)
    path = root / "scripts" / "finetune" / "diagnose" / "detectors.py"
    text = path.read_text(encoding="utf-8")
    anchor = "DETECTORS: tuple[Detector, ...] = (\n"
    assert text.count(anchor) == 1
    text = text.replace("\n\n# In priority order", RECIPE_CHECK + "\n# In priority order", 1)
    path.write_text(text.replace(anchor, anchor + RECIPE_ENTRY), encoding="utf-8")
    docs = run([sys.executable, "-m", "finetune", "docs"], root)
    after = digests(root)
    assert docs.returncode == 0, docs.stdout + docs.stderr
    assert {p for p in set(before) | set(after) if before.get(p) != after.get(p)} == {
        "scripts/finetune/diagnose/detectors.py", "references/diagnosis.md", "DESIGN.md"}

    out = tmp_path / "out"
    proc = run([sys.executable, "-m", "finetune", "diagnose", str(plain_run.logs.source), "-o", str(out)], root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("symptom: stay on GRPO; fix recipe_probe first"), proc.stdout
    assert "  - recipe_probe: the probe fired on 12 logged steps" in proc.stdout
    doc = json.loads((out / "diagnosis" / "diagnosis.json").read_text())
    assert doc["recommended_change"]["action"] == "read the probe's completions and fix what it found"
    assert doc["checks"][0] == {"name": "recipe_probe", "status": "symptom", "why": "the probe fired on 12 logged "
                                "steps", "priority": 1, "remedy": "read what the probe found",
                                "detects": "fires on every run (DESIGN.md's recipe, followed in a test)"}
    assert doc["thresholds"]["recipe_min_steps"] == 3
    md = (out / "diagnosis" / "report.md").read_text()
    assert "One change, against `recipe_probe`:\n\nread the probe's completions and fix what it found" in md
    assert "| 1 | `recipe_probe` | fires on every run" in (root / "references" / "diagnosis.md").read_text()
    assert "`recipe_probe`, " in (root / "DESIGN.md").read_text(encoding="utf-8")
    assert not failed(checks(root, ("tests/test_docs.py",)))
