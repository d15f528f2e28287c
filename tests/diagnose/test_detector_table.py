"""Detectors as data: one table entry per diagnose symptom and per Phase 1 red flag,
from which the checks, the priority, the symptom→variant map and the generated reference derive."""

from __future__ import annotations

import re
from pathlib import Path

from finetune import diagnose
from finetune.inspect import flags
from finetune.variants import VARIANT_SYMPTOM, VARIANTS


def test_every_detector_runs_a_diagnoser_method():
    names = [d.name for d in diagnose.DETECTORS]
    assert len(set(names)) == len(names) and tuple(names) == diagnose.SYMPTOMS == diagnose.PRIORITY
    for d in diagnose.DETECTORS:
        assert callable(getattr(diagnose.Diagnoser, d.method, None)), d.method
        assert d.doc.strip() and d.remedy.strip() and "\n" not in d.doc


def test_the_symptom_variant_map_lives_in_variants_only():
    assert diagnose.symptom_variant() == {s: v for v, s in VARIANT_SYMPTOM.items()}
    for variant, symptom in VARIANT_SYMPTOM.items():
        assert symptom in diagnose.SYMPTOMS and variant in VARIANTS and variant in diagnose.PAPERS
        assert variant in diagnose.remedy_text(symptom)
    # reward hacking is never answered with a variant
    assert diagnose.REWARD_HACKING not in VARIANT_SYMPTOM.values()
    source = Path(diagnose.__file__).read_text()
    assert not re.search(r"ENTROPY_COLLAPSE:\s*\"dapo\"", source), "a second symptom→variant map in diagnose.py"


def test_recommendation_for_hacking_outranks_the_variants():
    shown = [diagnose.Finding(diagnose.LENGTH_DRIFT, "symptom", "drift"),
             diagnose.Finding(diagnose.REWARD_HACKING, "symptom", "hack", {"carrier": "verbosity"})]
    variant, change = diagnose.recommended_change(shown, {}, "grpo")
    assert variant == "grpo" and change["kind"] == "reward" and change["reward"] == "verbosity"
    variant, change = diagnose.recommended_change(shown[:1], {}, "grpo")
    assert variant == "dr_grpo" and change["kind"] == "variant"


def test_every_red_flag_raised_has_a_table_entry():
    source = Path(flags.__file__).read_text()
    raised = set(re.findall(r'_flag\(\s*"([a-z_]+)"', source))
    assert raised and raised <= set(flags.RED_FLAGS), raised - set(flags.RED_FLAGS)
    assert flags._flag("truncated", None, "m")["remedy"] == flags.RED_FLAGS["truncated"].remedy


def test_generated_reference_lists_every_entry():
    from finetune.docs import REGISTRY

    assert any(t.path == "references/diagnosis.md" and t.producer == "finetune.diagnose:diagnosis_doc"
               for t in REGISTRY)
    doc = diagnose.diagnosis_doc()
    for d in diagnose.DETECTORS:
        assert f"`{d.name}` | {d.doc} | {diagnose.remedy_text(d.name)} |" in doc
    for name, flag in flags.RED_FLAGS.items():
        assert f"| `{name}` | {flag.doc} | {flag.remedy} |" in doc
