"""`finetune route`: the Phase 0 decision function, its CLI, and its agreement with the router skill."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from finetune import docs, route
from finetune.route import DPO, EVAL, GRPO, SFT, Answers, decide

ROUTER_SKILL = Path("skills/finetuning-method-selection/SKILL.md")


def all_answers():
    for v, d, p, h, b in itertools.product([True, False], [True, False], [True, False], [True, False],
                                           ["never", "sometimes", "always", "unknown"]):
        yield Answers(verifiable=v, demonstrations=d, preference_pairs=p, human_judged=h, base_success=b)
        if v:  # the signal kind matters for tool use only
            yield Answers(verifiable=v, signal_kind="tool_call", demonstrations=d, preference_pairs=p,
                          human_judged=h, base_success=b)


def test_tool_use_routes_to_grpo_with_the_tool_reward():
    decision = decide(Answers(verifiable=True, signal_kind="tool_call", base_success="sometimes"))
    assert decision.route == GRPO and decision.rule.id == "rlvr-tool-use"
    assert any("type: environment" in n for n in decision.rule.needs)
    assert decide(Answers(verifiable=True, signal_kind="tool_call", base_success="never")).route == SFT


def test_rules_are_exhaustive_and_every_rule_is_reachable():
    used = {decide(a).rule.id for a in all_answers()}
    assert used == {r.id for r in route.RULES}
    assert all(r.route in route.ROUTES for r in route.RULES)


@pytest.mark.parametrize("rule", route.RULES, ids=lambda r: r.id)
def test_each_rules_example_is_decided_by_that_rule(rule):
    assert decide(Answers(**rule.example)).rule is rule


def test_the_seeds_rules():
    # base success: never → SFT first; sometimes → GRPO (the seed's "When RL fits")
    assert decide(Answers(verifiable=True, base_success="never")).route == SFT
    assert decide(Answers(verifiable=True, base_success="sometimes")).route == GRPO
    unmeasured = decide(Answers(verifiable=True))
    assert unmeasured.route == GRPO and unmeasured.rule.provisional
    assert any("base success measured first" in n for n in unmeasured.rule.needs)
    # taste → DPO, reasoning → GRPO: a verifier wins over pairs; pairs without one go to DPO
    assert decide(Answers(verifiable=True, preference_pairs=True, base_success="sometimes")).route == GRPO
    assert decide(Answers(verifiable=False, preference_pairs=True, demonstrations=True)).route == DPO
    # human judgement with nothing to train on is an eval-harness problem, not a reason to jump to RL
    assert decide(Answers(verifiable=False, human_judged=True)).route == EVAL
    assert decide(Answers(verifiable=False, demonstrations=True)).route == SFT


def test_human_judged_changes_what_sft_needs():
    judged = decide(Answers(verifiable=False, demonstrations=True, human_judged=True))
    plain = decide(Answers(verifiable=False, demonstrations=True))
    assert judged.route == plain.route == SFT
    assert any("eval-harness-first" in n for n in judged.rule.needs)
    assert not any("eval-harness-first" in n for n in plain.rule.needs)


def test_router_skill_shows_exactly_the_rules(repo_root):
    """The skill's route table is the generated one, and names each route as a skill that exists."""
    outcome = docs.sync(repo_root, check=True, registry=[t for t in docs.REGISTRY if t.region == "routes"])
    # (sync also checks the table of contents of every long reference: not this test's concern)
    assert [o.status for o in outcome if o.target.region == "routes"] == ["ok"], \
        "run `finetune docs`: the router skill's table drifted"
    text = (repo_root / ROUTER_SKILL).read_text()
    for i, rule in enumerate(route.RULES, start=1):
        assert f"| {i} | {rule.condition} | [{rule.route}](../{rule.route}/SKILL.md)" in text
    for name in route.ROUTES:
        assert (repo_root / "skills" / name / "SKILL.md").is_file()
    # the questions the skill asks are the questions the code takes
    for field in route.Answers.model_fields:
        assert f"`{field}`" in text, field
    for kind in route.SIGNAL_KINDS:
        assert f"`{kind}`" in text, kind


# ---------------------------------------------------------------- CLI


def test_cli_flags_print_and_write_route_json(cli, tmp_path):
    out = tmp_path / "run"
    result = cli("route", "--verifiable", "yes", "--signal-kind", "unit_tests", "--base-success", "sometimes",
                 "-o", out)
    assert result.code == 0, result
    assert result.out.startswith(f"route: {GRPO}\n")
    assert "needs before it can start:" in result.out
    data = json.loads((out / "route.json").read_text())
    assert data["route"] == GRPO and data["rule"] == "rlvr" and data["provisional"] is False
    assert data["answers"]["signal_kind"] == "unit_tests"
    assert data["needs"] == list(decide(Answers(verifiable=True, base_success="sometimes")).rule.needs)
    assert not list(out.glob(".*.tmp"))


def test_cli_answers_file_and_flag_override(cli, tmp_path):
    answers = tmp_path / "answers.yaml"
    answers.write_text("verifiable: true\nsignal_kind: math_answer\nbase_success: never\ndemonstrations: false\n")
    result = cli("route", "--answers", answers, "--json")
    assert result.code == 0, result
    assert json.loads(result.out)["route"] == SFT
    result = cli("route", "--answers", answers, "--base-success", "sometimes", "--json")
    assert json.loads(result.out)["route"] == GRPO
    as_json = tmp_path / "answers.json"
    as_json.write_text(json.dumps({"verifiable": False, "preference_pairs": True}))
    assert json.loads(cli("route", "--answers", as_json, "--json").out)["route"] == DPO


def test_cli_no_output_dir_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("route", "--verifiable", "no").code == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, fragment", [
    ((), "verifiable: Field required"),
    (("--verifiable", "maybe"), "expected yes or no"),
    (("--verifiable", "yes", "--base-success", "often"), "invalid choice"),
    (("--verifiable", "no", "--signal-kind", "unit_tests"), "names a check, but verifiable is no"),
])
def test_cli_bad_flags_exit_2_and_write_nothing(cli, tmp_path, args, fragment):
    out = tmp_path / "run"
    result = cli("route", *args, "-o", out)
    assert result.code == 2, result
    assert fragment in result.err and result.err.count("\n") == 1
    assert not out.exists()


def test_cli_bad_answers_file_names_file_and_line(cli, tmp_path):
    answers = tmp_path / "answers.yaml"
    answers.write_text("verifiable: true\nbase_success: often\n")
    result = cli("route", "--answers", answers)
    assert result.code == 2
    assert f"{answers}:2" in result.err and "base_success" in result.err
    answers.write_text("verifiable: true\nverfiable_typo: 1\n")
    result = cli("route", "--answers", answers)
    assert result.code == 2 and f"{answers}:2" in result.err and "known questions" in result.err
    answers.write_text("- a list\n")
    assert cli("route", "--answers", answers).code == 2
    assert cli("route", "--answers", tmp_path / "missing.yaml").code == 2


def test_cli_does_not_replace_route_json_on_bad_input(cli, tmp_path):
    out = tmp_path / "run"
    assert cli("route", "--verifiable", "no", "--demonstrations", "yes", "-o", out).code == 0
    before = (out / "route.json").read_text()
    assert cli("route", "--verifiable", "perhaps", "-o", out).code == 2
    assert (out / "route.json").read_text() == before


def test_router_skill_example_answers_route_as_the_skill_says(cli, repo_root, tmp_path):
    import yaml

    from finetune import lint

    text = (repo_root / ROUTER_SKILL).read_text()
    blocks = [b for b in lint.code_blocks(text) if b.lang == "yaml"]
    assert len(blocks) == 1
    answers = tmp_path / "answers.yaml"
    answers.write_text(blocks[0].text)
    assert set(yaml.safe_load(blocks[0].text)) == set(route.Answers.model_fields)
    result = cli("route", "--answers", answers, "--json")
    data = json.loads(result.out)
    assert (data["route"], data["provisional"]) == (GRPO, True)
    assert "routes\nto `grpo-rlvr-training`, provisionally" in text


def test_cli_survives_a_closed_pipe(tmp_path):
    """`finetune route ... | head -1`: the reader closing the pipe is not a traceback."""
    import subprocess
    import sys

    proc = subprocess.run(
        f"'{sys.executable}' -m finetune --help | head -1", shell=True, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip()


def test_demonstrations_beside_a_grpo_route_offer_sft_and_sft_then_grpo(cli, tmp_path):
    out = tmp_path / "run"
    result = cli("route", "--verifiable", "yes", "--signal-kind", "parser", "--demonstrations", "yes",
                 "--base-success", "sometimes", "-o", out)
    assert result.code == 0, result
    data = json.loads((out / "route.json").read_text())
    assert data["route"] == GRPO and len(data["alternatives"]) == 2
    assert data["alternatives"][1].startswith("lora-qlora-recipes then grpo-rlvr-training")
    assert "also offer the user (demonstrations exist):" in result.out
    plain = cli("route", "--verifiable", "yes", "--signal-kind", "parser", "--demonstrations", "no",
                "--base-success", "sometimes", "-o", tmp_path / "other")
    assert "also offer" not in plain.out
    assert json.loads((tmp_path / "other" / "route.json").read_text())["alternatives"] == []
