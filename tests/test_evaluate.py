"""`finetune eval RUN --checkpoint DIR`: the held-out prompts sampled from the base and the checkpoint with the gated
settings, scored by the gated rewards in an isolated child, success per reward before / after with a paired interval,
the live hacking checks, a plot. The statistics are checked against scipy."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from gated_helpers import gated_run

from finetune import evaluate, rundir


def test_sign_test_equals_scipy_binomtest():
    from scipy.stats import binomtest

    for up, down in [(0, 0), (5, 0), (3, 2), (10, 4), (1, 12), (40, 25)]:
        want = 1.0 if up + down == 0 else binomtest(up, up + down, 0.5).pvalue
        assert evaluate.sign_test(up, down) == pytest.approx(want, rel=1e-12)


def test_paired_interval_brackets_the_mean_change_and_counts_prompts():
    rng = random.Random(0)
    before = [rng.random() for _ in range(30)]
    after = [min(1.0, b + 0.2) for b in before]
    s = evaluate.paired(before, after, seed=1)
    assert s["prompts"] == 30 and s["rose"] + s["fell"] + s["same"] == 30 and s["fell"] == 0
    lo, hi = s["interval"]
    assert lo <= s["change"] <= hi and lo > 0  # every prompt rose: the interval excludes 0
    flat = evaluate.paired(before, before, seed=1)
    assert flat["change"] == 0 and flat["interval"] == [0, 0] and flat["p_sign_test"] == 1.0


@pytest.fixture(scope="module")
def gated(tmp_path_factory, tiny_model_dir):
    return gated_run(tmp_path_factory.mktemp("eval") / "run", str(tiny_model_dir))


@pytest.mark.slow
def test_eval_of_a_checkpoint_equal_to_the_base_reports_no_change(gated, tiny_model_dir, cli):
    r = cli("eval", gated, "--checkpoint", tiny_model_dir, "--name", "same", "--k", "2",
            "--backend", "transformers")
    assert r.code == 0, r
    target = gated / rundir.EVAL_DIR / "same"
    assert {p.name for p in target.iterdir()} == {evaluate.RESULT, evaluate.REPORT, evaluate.PLOT, evaluate.SAMPLES}
    result = json.loads((target / evaluate.RESULT).read_text())
    assert result["gate"]["status"] == "PASS" and result["heldout"]["source"] == "file"
    assert result["heldout"]["rows"] == [0, 1, 2, 3] and result["k"] == 2
    assert set(result["results"]) == {"accept", "format_ok", "correct", "total"}
    for s in result["results"].values():  # the same model, the same seed: the same samples on both sides
        assert s["change"] == 0 and s["interval"] == [0, 0] and s["p_sign_test"] == 1.0 and s["prompts"] == 4
    samples = [json.loads(x) for x in (target / evaluate.SAMPLES).read_text().splitlines()]
    assert len(samples) == 2 * 4 * 2 and {s["side"] for s in samples} == {"before", "after"}
    by_side = {side: [s["completion"] for s in samples if s["side"] == side] for side in ("before", "after")}
    assert by_side["before"] == by_side["after"]
    assert all(set(s["scores"]) == {"format_ok", "correct"} for s in samples)
    assert set(result["hacking"]["after"]) == {"flags", "probes_passing"}
    assert (target / evaluate.PLOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "sign test p" in (target / evaluate.REPORT).read_text()


@pytest.mark.slow
def test_eval_refuses_without_the_gate_and_a_changed_split_voids_it(gated, tiny_model_dir, cli, tmp_path):
    assert cli("eval", gated, "--checkpoint", tmp_path / "nope").code == 2
    spec = gated / rundir.SPEC
    original = spec.read_text()
    data = yaml.safe_load(original)
    data["dataset"]["heldout"]["prompts"] = 3
    spec.write_text(yaml.safe_dump(data))
    try:
        r = cli("eval", gated, "--checkpoint", tiny_model_dir, "--backend", "transformers")
        assert r.code == 2 and "gate PASS does not hold" in r.err and len(r.err.strip().splitlines()) == 1
        assert not (gated / rundir.EVAL_DIR / Path(tiny_model_dir).name).exists()
    finally:
        spec.write_text(original)
