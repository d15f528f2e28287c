"""`finetune diagnose` on logs of REAL short GRPO runs (trained by make_runs.py in this session)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow


def _diagnosis(run_dir: Path) -> dict:
    return json.loads((run_dir / "diagnosis" / "diagnosis.json").read_text())


def _names(doc: dict) -> list[str]:
    return [s["name"] for s in doc["symptoms"]]


def _check(doc: dict, name: str) -> dict:
    return next(c for c in doc["checks"] if c["name"] == name)


@pytest.fixture(scope="module")
def diagnosed(grpo_runs, tmp_path_factory):
    """Each run diagnosed once through the CLI, into its own output folder (-o)."""
    from finetune.cli import main

    out = {}
    for scenario, run_dir in grpo_runs.items():
        target = tmp_path_factory.mktemp(f"diag-{scenario}")
        assert main(["diagnose", str(run_dir), "-o", str(target)]) == 0
        out[scenario] = (target, _diagnosis(target))
    return out


# ----------------------------------------------------------------------------------------------
# the four runs, each classified


def test_collapse_run_is_entropy_collapse_and_gets_dapo(diagnosed):
    target, doc = diagnosed["collapse"]
    assert doc["verdict"] == "symptom"
    assert "entropy_collapse" in _names(doc)
    sym = next(s for s in doc["symptoms"] if s["name"] == "entropy_collapse")
    ev = sym["evidence"]
    assert ev["drop_fraction"] >= 0.5 and ev["entropy_trend"]["spearman_rho"] < 0
    assert sym["window"]["from_step"] <= ev["halved_at_step"] <= ev["settled_at_step"] == sym["window"]["to_step"]
    assert doc["recommended_variant"] == "dapo"
    change = doc["recommended_change"]
    assert change["kind"] == "variant" and change["arxiv"] == "2503.14476"
    # the exact delta against the run's own grpo_config.yaml (plain GRPO, beta 0.01)
    assert change["kwargs"]["loss_type"] == {"from": "grpo", "to": "dapo"}
    assert change["kwargs"]["epsilon_high"] == {"from": 0.2, "to": 0.28}
    assert change["kwargs"]["beta"] == {"from": 0.01, "to": 0.0}
    assert change["kwargs"]["mask_truncated_completions"] == {"from": False, "to": True}
    assert "epsilon" not in change["kwargs"]  # 0.2 in both: not a change


def test_length_paying_run_is_reward_hacking_naming_the_shaping_reward(diagnosed):
    """Reward hacking: the shaping reward pays for length; the total rises, correctness stays flat. The
    diagnosis names reward_hacking and the reward carrying the rise, and recommends no variant."""
    target, doc = diagnosed["length"]
    assert doc["verdict"] == "symptom"
    assert "reward_hacking" in _names(doc) and "entropy_collapse" not in _names(doc)
    hack = next(s for s in doc["symptoms"] if s["name"] == "reward_hacking")
    assert hack["evidence"]["carrier"] == "verbosity" and "rewards/verbosity/mean" in hack["summary"]
    assert hack["evidence"]["reward_trend"]["p_value"] < 0.05
    assert list(hack["evidence"]["correctness_trends"]) == ["rewards/correctness/mean"]  # role from REWARD_META
    change = doc["recommended_change"]
    assert change["kind"] == "reward" and change["reward"] == "verbosity" and change["kwargs"] == {}
    assert doc["recommended_variant"] == "grpo" and "Phase 1" in change["action"]
    assert "verbosity" in doc["headline"] and "no variant" in doc["headline"]
    # the length drift behind it is still reported, measured from the first logged steps
    ev = next(s for s in doc["symptoms"] if s["name"] == "length_drift")["evidence"]
    assert ev["length_rise"] >= 0.25 and ev["length_trend"]["p_value"] < 0.05
    assert ev["correctness_trend"]["key"] == "rewards/correctness/mean"
    report = (target / "diagnosis" / "report.md").read_text()
    assert "None" not in report and change["action"] in report


def _strip_reward(history: list[dict], name: str, into: str) -> list[dict]:
    """The same logs without reward ``name`` (its columns dropped, the total re-summed from the rest)."""
    out = []
    for e in history:
        e = {k: v for k, v in e.items() if not k.startswith(f"rewards/{name}/")}
        if into in e:
            e["reward"] = e[into]
        out.append(e)
    return out


def test_length_drift_without_a_paying_reward_gets_dr_grpo(run_copy, cli):
    """The length run's real logs with the length-paying reward taken out: length still rises while
    correctness (now the whole reward) stays flat — GRPO's length bias, the symptom Dr. GRPO targets."""
    run = run_copy("length")
    state_path = run / "train" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    state["log_history"] = _strip_reward(state["log_history"], "verbosity", "rewards/correctness/mean")
    state_path.write_text(json.dumps(state))
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    assert "length_drift" in _names(doc) and "reward_hacking" not in _names(doc)
    assert doc["recommended_variant"] == "dr_grpo"
    kwargs = doc["recommended_change"]["kwargs"]
    assert kwargs["loss_type"] == {"from": "grpo", "to": "dr_grpo"}
    assert kwargs["scale_rewards"] == {"from": "group", "to": "none"}
    assert doc["recommended_change"]["arxiv"] == "2503.20783"
    report = (run / "diagnosis" / "report.md").read_text()
    for k, v in kwargs.items():
        assert f"| `{k}` | `{v['from']}` | `{v['to']}` |" in report


def test_an_early_length_drift_is_named(run_copy, cli):
    """The length run's drift followed by as many steps again at the drifted length: a baseline taken
    over the first 20% of the run would start after the drift; the first logged steps do not."""
    run = run_copy("length")
    state_path = run / "train" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    train = [e for e in state["log_history"] if "loss" in e]
    last = train[-1]
    extra = [{**last, "step": last["step"] + i} for i in range(1, 2 * len(train) + 1)]
    state["log_history"] = train + extra
    state_path.write_text(json.dumps(state))
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    drift = next(s for s in doc["symptoms"] if s["name"] == "length_drift")
    lengths = [e["completions/mean_length"] for e in train]
    assert drift["evidence"]["length_trend"]["start"] == pytest.approx(sorted(lengths[:3])[1], rel=1e-3)
    assert drift["window"]["to_step"] <= last["step"] < doc["run"]["last_step"]  # the drift was early
    assert "first 3 steps" in drift["summary"]


def test_length_climbing_to_the_cap_is_drift_plus_truncation(diagnosed):
    _, doc = diagnosed["length"]
    drift = next(s for s in doc["symptoms"] if s["name"] == "length_drift")
    assert drift["evidence"]["climbed_to_cap"] is True and "up to the cap max_completion_length=32" in drift["summary"]
    trunc = [s for s in doc["symptoms"] if s["name"] == "truncation"]
    if trunc:  # when the cut-off share is high enough to be a symptom, it says where the length came from
        assert "length drift plus truncation" in trunc[0]["summary"]


def test_unknown_settings_are_said_so_never_none(run_copy, cli):
    run = run_copy("length")
    model = yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())["model_name_or_path"]
    (run / "config" / "grpo_config.yaml").unlink()
    assert cli("diagnose", run, "--model", model).code == 0
    doc = _diagnosis(run)
    report = (run / "diagnosis" / "report.md").read_text()
    assert "=None" not in report and "None" not in json.dumps([c["why"] for c in doc["checks"]])
    drift = next(s for s in doc["symptoms"] if s["name"] == "length_drift")
    assert drift["evidence"]["max_completion_length"] == "unknown (no config found)"
    for s in doc["symptoms"]:
        if s["name"] == "truncation":
            assert "max_completion_length=unknown (no config found)" in s["summary"]


def test_healthy_run_stays_on_grpo(diagnosed):
    target, doc = diagnosed["healthy"]
    assert doc["symptoms"] == [], doc["symptoms"]
    assert doc["verdict"] == "healthy"
    assert doc["recommended_variant"] == "grpo" and doc["recommended_change"] is None
    assert "stay on GRPO" in doc["headline"]
    # every detector ran: a healthy verdict is not an absence of data
    assert {c["name"]: c["status"] for c in doc["checks"]} == {
        "moe_without_gspo": "clear", "nan": "clear", "reward_hacking": "clear", "entropy_collapse": "clear",
        "length_drift": "clear",
        "kl_blowup": "clear", "truncation": "clear", "zero_variance_groups": "clear", "flat_reward": "clear",
        "stale_vllm_weights": "not_evaluated", "train_inference_mismatch": "not_evaluated"}
    for name in ("stale_vllm_weights", "train_inference_mismatch"):
        check = next(c for c in doc["checks"] if c["name"] == name)
        assert "use_vllm" in check["why"], check  # said why: this CPU run generated with transformers, not vLLM


def test_moe_run_requires_gspo(diagnosed):
    target, doc = diagnosed["moe"]
    assert "moe_without_gspo" in _names(doc)
    ev = next(s for s in doc["symptoms"] if s["name"] == "moe_without_gspo")["evidence"]
    assert ev["num_experts"] == 4 and ev["importance_sampling_level"] == "token"
    assert doc["recommended_variant"] == "gspo"
    kwargs = doc["recommended_change"]["kwargs"]
    assert kwargs["importance_sampling_level"] == {"from": "token", "to": "sequence"}
    assert kwargs["epsilon"] == {"from": 0.2, "to": 0.0003}
    # GSPO only acts off-policy: two optimiser steps per generation (the run had one)
    assert kwargs["steps_per_generation"]["to"] == 2


def test_outputs_written_together(diagnosed):
    for _scenario, (target, doc) in diagnosed.items():
        files = sorted(p.name for p in (target / "diagnosis").iterdir())
        assert files == ["curves.png", "diagnosis.json", "report.md"], files
        png = (target / "diagnosis" / "curves.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        report = (target / "diagnosis" / "report.md").read_text()
        assert report.startswith(f"# Diagnosis: {doc['verdict']}")
        for s in doc["symptoms"]:
            assert f"**{s['name']}**" in report


def test_report_shows_the_kwargs_delta(diagnosed):
    _, doc = diagnosed["collapse"]
    report = (diagnosed["collapse"][0] / "diagnosis" / "report.md").read_text()
    assert doc["recommended_change"]["kwargs"]
    for k, v in doc["recommended_change"]["kwargs"].items():
        assert f"| `{k}` | `{v['from']}` | `{v['to']}` |" in report


def test_checks_and_report_come_from_the_detector_table(diagnosed):
    from finetune.diagnose.detectors import DETECTORS, remedy_text

    for _, (target, doc) in diagnosed.items():
        assert [c["name"] for c in doc["checks"]] == [d.name for d in DETECTORS]
        assert [c["priority"] for c in doc["checks"]] == list(range(1, len(DETECTORS) + 1))
        report = (target / "diagnosis" / "report.md").read_text()
        for d, c in zip(DETECTORS, doc["checks"]):
            assert c["remedy"] == remedy_text(d.name) and c["detects"] == d.doc
            assert f"| {d.name} | {c['status']} |" in report


# ----------------------------------------------------------------------------------------------
# inputs: trainer_state.json, checkpoint folders, JSONL, roles


def test_trainer_state_path_and_checkpoint_dir_give_the_same_verdict(run_copy, cli):
    run = run_copy("collapse")
    state = run / "train" / "trainer_state.json"
    assert cli("diagnose", state).code == 0
    first = _diagnosis(run)
    ckpt = run / "train" / "checkpoint-50"
    ckpt.mkdir()
    state.rename(ckpt / "trainer_state.json")
    res = cli("diagnose", run)
    assert res.code == 0, res
    again = _diagnosis(run)
    assert again["run"]["log"].endswith("checkpoint-50/trainer_state.json")
    assert (first["verdict"], _names(first)) == (again["verdict"], _names(again))


def test_jsonl_log_in_the_run_dir(run_copy, cli):
    run = run_copy("length")
    history = json.loads((run / "train" / "trainer_state.json").read_text())["log_history"]
    log = run / "train" / "logs.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in history))
    res = cli("diagnose", log)
    assert res.code == 0, res
    assert "length_drift" in _names(_diagnosis(run))
    misnamed = log.rename(log.with_suffix(".json"))  # one dict per line under a .json name
    assert cli("diagnose", misnamed).code == 0
    assert _diagnosis(run)["run"]["log"] == str(misnamed) and "length_drift" in _names(_diagnosis(run))


def test_correctness_role_needed_for_length_drift(grpo_runs, tmp_path, cli):
    history = json.loads((grpo_runs["length"] / "train" / "trainer_state.json").read_text())["log_history"]
    # reward names that suggest no role (finetune.diagnose.logs.ROLE_STEMS would read "correctness" as one)
    text = "".join(json.dumps(e) + "\n" for e in history)
    text = text.replace("rewards/correctness/", "rewards/r_answer/").replace("rewards/verbosity/", "rewards/r_paid/")
    log = tmp_path / "bare.jsonl"  # no spec, config or rewards.py beside it
    log.write_text(text)
    assert cli("diagnose", log).code == 0
    doc = _diagnosis(tmp_path)
    assert _check(doc, "length_drift")["status"] == "not_evaluated"
    assert _check(doc, "reward_hacking")["status"] == "not_evaluated"
    assert any("correctness" in c for c in doc["caveats"])
    assert cli("diagnose", log, "--correctness", "r_answer").code == 0
    doc = _diagnosis(tmp_path)
    assert "length_drift" in _names(doc) and doc["run"]["reward_roles_source"] == "--correctness"
    assert next(s for s in doc["symptoms"] if s["name"] == "reward_hacking")["evidence"]["carrier"] == "r_paid"


def test_reward_meta_beside_the_log_names_the_correctness_reward(grpo_runs, tmp_path, cli):
    """A bare log folder with the run's rewards.py beside it: roles come from its REWARD_META."""
    import shutil

    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(grpo_runs["length"] / "train" / "trainer_state.json", folder / "trainer_state.json")
    shutil.copy(grpo_runs["length"] / "rewards.py", folder / "rewards.py")
    assert cli("diagnose", folder / "trainer_state.json").code == 0
    doc = _diagnosis(folder)
    assert "REWARD_META" in doc["run"]["reward_roles_source"]
    assert doc["run"]["correctness_keys"] == ["rewards/correctness/mean"]
    assert "reward_hacking" in _names(doc)


def test_zero_std_fraction_not_read_per_group_under_batch_scaling(run_copy, cli):
    run = run_copy("healthy")
    cfg_path = run / "config" / "grpo_config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["scale_rewards"] = "batch"
    cfg_path.write_text(yaml.safe_dump(cfg))
    assert cli("diagnose", run).code == 0
    check = _check(_diagnosis(run), "zero_variance_groups")
    assert check["status"] == "not_evaluated" and "batch" in check["why"]


def test_nan_in_a_real_log_is_a_symptom_without_a_variant(run_copy, cli):
    run = run_copy("healthy")
    state_path = run / "train" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    train = [e for e in state["log_history"] if "loss" in e]
    train[len(train) // 2]["loss"] = math.nan
    state_path.write_text(json.dumps(state))  # json writes NaN, as TRL does
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    assert "nan" in _names(doc) and doc["verdict"] == "symptom"
    nan = next(s for s in doc["symptoms"] if s["name"] == "nan")
    assert nan["evidence"]["first_step_per_key"] == {"loss": train[len(train) // 2]["step"]}
    assert doc["recommended_variant"] == "grpo" and doc["recommended_change"]["kind"] == "health"


def test_too_few_steps_is_insufficient(run_copy, cli):
    run = run_copy("healthy")
    state_path = run / "train" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    state["log_history"] = state["log_history"][:6]
    state_path.write_text(json.dumps(state))
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    assert doc["verdict"] == "insufficient" and doc["symptoms"] == []
    assert doc["recommended_variant"] == "grpo" and doc["recommended_change"] is None


# ----------------------------------------------------------------------------------------------
# malformed / truncated / empty logs: one line, exit 2, nothing written


def _truncated(text: str) -> str:
    return text[: len(text) // 2]


def _jsonl_broken(text: str) -> str:
    lines = [json.dumps(e) for e in json.loads(text)["log_history"]]
    lines[3] = lines[3][:20]
    return "\n".join(lines) + "\n"


def _not_a_dict(text: str) -> str:
    state = json.loads(text)
    state["log_history"][2] = [1, 2, 3]
    return json.dumps(state)


def _string_metric(text: str) -> str:
    state = json.loads(text)
    state["log_history"][2]["reward"] = "high"
    return json.dumps(state)


def _summary_only(text: str) -> str:
    state = json.loads(text)
    state["log_history"] = [e for e in state["log_history"] if "train_runtime" in e]
    return json.dumps(state)


@pytest.mark.parametrize("name,mutate", [
    ("trainer_state.json", lambda t: ""),
    ("trainer_state.json", _truncated),
    ("logs.jsonl", _jsonl_broken),
    ("trainer_state.json", _not_a_dict),
    ("trainer_state.json", _string_metric),
    ("trainer_state.json", _summary_only),
    ("trainer_state.json", lambda t: json.dumps({"global_step": 3})),
], ids=["empty", "truncated", "jsonl-bad-line", "entry-not-dict", "string-metric", "no-training-entries",
        "no-log-history"])
def test_bad_logs_exit_2_with_one_line(grpo_runs, tmp_path, cli, name, mutate):
    text = (grpo_runs["healthy"] / "train" / "trainer_state.json").read_text()
    bad = tmp_path / name
    bad.write_text(mutate(text))
    res = cli("diagnose", bad)
    assert res.code == 2, res
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert not (tmp_path / "diagnosis").exists()


def test_missing_run_exits_2(tmp_path, cli):
    res = cli("diagnose", tmp_path / "nope")
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1
    res = cli("diagnose", tmp_path)  # a folder without any trainer_state.json
    assert res.code == 2 and "trainer_state.json" in res.err


# ----------------------------------------------------------------------------------------------
# --apply: the spec gets the variant (original kept), config/ is re-rendered by the renderer

SPEC_ROWS = [{"prompt": f"What is {a} plus {b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]]


COLLAPSE_REWARDS = """\
  - {name: lottery, type: judge, model: judge, rubric: "Score the answer from 0 to 10.", weight: 1.0}
"""
HEALTHY_REWARDS = """\
  - {name: answer_format, type: format, pattern: answer_tag, weight: 0.5}
  - {name: closeness, type: exact_match, answer_column: answer, extract: answer_tag, weight: 1.0}
"""


def _write_spec(run: Path, model: Path, rewards: str) -> Path:
    """A run spec beside the run (its rewards named as the run's), to be edited by --apply."""
    (run / "data").mkdir(exist_ok=True)
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SPEC_ROWS))
    text = f"""# the run spec (comments survive --apply)
name: tiny-run
model: {model}
dataset: {{path: data/train.jsonl, prompt_column: prompt, answer_column: answer}}
rewards:
{rewards}hardware: {{profile: h100-80gb, gpus: 1, nodes: 1}}
variant: grpo   # plain GRPO first
generation: {{max_prompt_length: 64, max_completion_length: 32}}
training: {{per_device_train_batch_size: 8, gradient_accumulation_steps: 1, num_generations: 8, logging_steps: 1}}
"""
    (run / "spec.yaml").write_text(text)
    return run / "spec.yaml"


def test_apply_switches_the_variant_and_rerenders(run_copy, grpo_runs, cli):
    run = run_copy("collapse")
    model = Path(yaml.safe_load((grpo_runs["collapse"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    spec = _write_spec(run, model, COLLAPSE_REWARDS)
    original = spec.read_text()
    res = cli("diagnose", run, "--apply", "--no-gate", "--approve", "--yes")
    assert res.code == 0, res
    doc = _diagnosis(run)
    assert doc["recommended_variant"] == "dapo" and doc["run"]["reward_roles_source"] == str(spec)
    assert "applied: variant dapo" in res.out
    new = spec.read_text()
    assert "variant: dapo   # plain GRPO first" in new and new.replace("variant: dapo", "variant: grpo") == original
    kept = list(run.glob("spec.before-dapo.*.yaml"))
    assert len(kept) == 1 and kept[0].read_text() == original
    rendered = yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())
    for name, change in doc["recommended_change"]["kwargs"].items():
        assert rendered[name] == change["to"], name  # the renderer wrote exactly the recommended values


def test_apply_on_a_healthy_run_changes_nothing(run_copy, grpo_runs, cli):
    run = run_copy("healthy")
    model = Path(yaml.safe_load((grpo_runs["healthy"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    spec = _write_spec(run, model, HEALTHY_REWARDS)
    before = spec.read_bytes()
    config_before = (run / "config" / "grpo_config.yaml").read_bytes()
    res = cli("diagnose", run, "--apply", "--no-gate", "--approve", "--yes")
    assert res.code == 0, res
    assert "nothing applied" in res.out and "stay on GRPO" in res.out
    assert spec.read_bytes() == before and (run / "config" / "grpo_config.yaml").read_bytes() == config_before
    assert not list(run.glob("spec.before-*"))


def test_config_from_trls_saved_training_args(run_copy, cli):
    """Without a grpo_config.yaml the delta is computed against TRL's own training_args.bin."""
    import torch
    from trl import GRPOConfig

    run = run_copy("collapse")
    cfg = yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())
    (run / "config" / "grpo_config.yaml").unlink()
    kwargs = {k: v for k, v in cfg.items() if k not in ("model_name_or_path", "reward_funcs")}
    args = GRPOConfig(output_dir=str(run / "train"), use_cpu=True, bf16=False, report_to="none",
                      **{**kwargs, "epsilon_high": 0.25})
    torch.save(args, run / "train" / "training_args.bin")  # what Trainer.save_model writes
    assert cli("diagnose", run, "--model", cfg["model_name_or_path"]).code == 0
    doc = _diagnosis(run)
    assert doc["run"]["config_source"].endswith("training_args.bin")
    assert doc["recommended_change"]["kwargs"]["epsilon_high"] == {"from": 0.25, "to": 0.28}


def test_apply_renders_gspo_off_policy_for_the_moe_run(run_copy, grpo_runs, cli):
    run = run_copy("moe")
    model = Path(yaml.safe_load((grpo_runs["moe"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    _write_spec(run, model, HEALTHY_REWARDS)
    res = cli("diagnose", run, "--apply", "--no-gate", "--approve", "--yes")
    assert res.code == 0, res
    assert "applied: variant gspo" in res.out
    rendered = yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())
    assert rendered["importance_sampling_level"] == "sequence" and rendered["loss_type"] == "grpo"
    # off-policy, or GSPO changes nothing
    assert rendered["steps_per_generation"] > rendered["gradient_accumulation_steps"] or rendered["num_iterations"] > 1


def test_apply_refused_by_the_renderer_leaves_spec_and_config(run_copy, grpo_runs, cli):
    """Without a PASS gate record the renderer refuses: the spec and config/ stay as they were."""
    run = run_copy("collapse")
    model = Path(yaml.safe_load((grpo_runs["collapse"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    spec = _write_spec(run, model, COLLAPSE_REWARDS)
    before, config_before = spec.read_bytes(), (run / "config" / "grpo_config.yaml").read_bytes()
    res = cli("diagnose", run, "--apply")  # no --no-gate, no gate.json
    assert res.code in (1, 2), res
    assert "Traceback" not in res.err and res.err.strip()
    assert spec.read_bytes() == before and not list(run.glob("spec.before-*"))
    assert (run / "config" / "grpo_config.yaml").read_bytes() == config_before
    assert _diagnosis(run)["recommended_variant"] == "dapo"  # the diagnosis itself stands


def test_apply_with_a_spec_kept_elsewhere_renders_into_the_run(run_copy, grpo_runs, cli, tmp_path):
    run = run_copy("collapse")
    model = Path(yaml.safe_load((grpo_runs["collapse"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    elsewhere = tmp_path / "specs"
    elsewhere.mkdir()
    spec = _write_spec(elsewhere, model, COLLAPSE_REWARDS)
    res = cli("diagnose", run, "--spec", spec, "--apply", "--no-gate", "--approve", "--yes")
    assert res.code == 0, res
    assert "variant: dapo" in spec.read_text() and len(list(elsewhere.glob("spec.before-dapo.*.yaml"))) == 1
    assert yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())["loss_type"] == "dapo"
    assert not (elsewhere / "config").exists()


def test_a_run_already_on_the_variant_is_not_told_to_switch_again(run_copy, cli):
    """The collapse run re-labelled as DAPO: the symptom stands, but no second switch is proposed."""
    run = run_copy("collapse")
    cfg_path = run / "config" / "grpo_config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg.update(loss_type="dapo", epsilon_high=0.28, beta=0.0, mask_truncated_completions=True)
    cfg_path.write_text(yaml.safe_dump(cfg))
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    assert "entropy_collapse" in _names(doc)
    assert doc["run"]["current_variant"] == "dapo" and doc["recommended_variant"] == "dapo"
    assert doc["recommended_change"]["kind"] == "health" and doc["recommended_change"]["kwargs"] == {}
    assert doc["headline"].startswith("stay on dapo")


def test_rediagnosing_a_run_on_its_variant_keeps_the_licence(run_copy, grpo_runs, cli):
    """Switch the collapse run to DAPO, then diagnose it again on logs that no longer show the symptom
    (the healthy run's, standing in for a DAPO run that recovered). The new diagnosis.json carries the
    original evidence forward, so the DAPO spec can still be rendered (variants contract) — and only because
    of that evidence: without the carried licence the renderer refuses it."""
    import shutil

    run = run_copy("collapse")
    model = Path(yaml.safe_load((grpo_runs["collapse"] / "config" / "grpo_config.yaml").read_text())["model_name_or_path"])
    spec = _write_spec(run, model, COLLAPSE_REWARDS)
    assert cli("diagnose", run, "--apply", "--no-gate", "--approve", "--yes").code == 0
    assert "variant: dapo" in spec.read_text()
    shutil.copy(grpo_runs["healthy"] / "train" / "trainer_state.json", run / "train" / "trainer_state.json")
    for checkpoint in (run / "train").glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
    res = cli("diagnose", run)
    assert res.code == 0, res
    doc = _diagnosis(run)
    assert doc["run"]["current_variant"] == "dapo" and "entropy_collapse" not in _names(doc)
    licence = doc["variant_licence"]
    assert licence["variant"] == "dapo" and licence["symptom"] == "entropy_collapse"
    assert licence["evidence"]["name"] == "entropy_collapse"
    assert cli("config", "render", spec, "--no-gate").code == 0

    del doc["variant_licence"]
    (run / "diagnosis" / "diagnosis.json").write_text(json.dumps(doc))
    refused = cli("config", "render", spec, "--no-gate")
    assert refused.code == 1 and "entropy_collapse" in refused.err


def test_foreign_non_numeric_fields_are_ignored_not_fatal(run_copy, cli):
    run = run_copy("healthy")
    state_path = run / "train" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    for e in state["log_history"]:
        e["note"] = "logged by a callback"
    state_path.write_text(json.dumps(state))
    assert cli("diagnose", run).code == 0
    doc = _diagnosis(run)
    assert doc["verdict"] == "healthy" and any("note" in c for c in doc["caveats"])
