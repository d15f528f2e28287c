"""`finetune lint`: passes on the repo, and finds each planted fault in a temp copy of the plugin."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from finetune import lint

GRPO_SKILL = Path("skills/grpo-rlvr-training/SKILL.md")
GRPO_RECIPE = Path("references/grpo-recipe.md")  # the generated GRPOConfig block the GRPO skill links
FINDING_RE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<msg>.+)$")
COPIED = (".claude-plugin", "skills", "agents", "commands", "references", "scripts", "README.md", "LICENSE")


@pytest.fixture(scope="module")
def pristine_copy(repo_root, tmp_path_factory) -> Path:
    """The plugin's Markdown and scripts copied once; each test works on its own copy of this copy."""
    dst = tmp_path_factory.mktemp("plugin-pristine") / "plugin"
    dst.mkdir()
    for name in COPIED:
        src = repo_root / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif src.is_file():
            shutil.copy2(src, dst / name)
    # The bootstrap is written by another part of the project; the copy must not depend on its progress.
    boot = dst / "scripts" / "bootstrap.sh"
    if not boot.exists():
        boot.write_text("#!/bin/sh\n")
    return dst


PENDING_MODULE = re.compile(r"cannot run: its module finetune\.\w+ does not load \(ModuleNotFoundError")


@pytest.fixture(scope="module")
def baseline(pristine_copy) -> set[tuple[str, int, str]]:
    """Findings on the untouched copy. Only commands whose module is not written yet may appear here (other
    parts of the project add them); anything else fails test_copy_is_clean."""
    out = set()
    for line in lint.render_findings(lint.lint(pristine_copy), pristine_copy):
        m = FINDING_RE.match(line)
        out.add((m["path"], int(m["line"]), m["msg"]))
    return out


def new_findings(cli, plugin: Path, baseline) -> list[tuple[str, int, str]]:
    return [f for f in findings_of(cli("lint", plugin)) if f not in baseline]


@pytest.fixture
def plugin(pristine_copy, tmp_path) -> Path:
    dst = tmp_path / "plugin"
    shutil.copytree(pristine_copy, dst)
    return dst


def findings_of(result) -> list[tuple[str, int, str]]:
    out = []
    for line in result.out.splitlines():
        m = FINDING_RE.match(line)
        if m:
            out.append((m["path"], int(m["line"]), m["msg"]))
    return out


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not found exactly once in {path}"
    path.write_text(text.replace(old, new))


def line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def assert_planted(cli, plugin: Path, rel: str, fragment: str, line: int | None = None) -> None:
    result = cli("lint", plugin)
    assert result.code == 1, result
    hits = [f for f in findings_of(result) if f[0] == rel and fragment in f[2]]
    assert hits, f"no finding containing {fragment!r} for {rel}: {result.out}"
    if line is not None:
        assert any(h[1] == line for h in hits), (hits, line)


# ---------------------------------------------------------------- the repo itself


def test_repo_is_clean(cli, repo_root):
    """Clean, except for what other parts of the project have not written yet: the bootstrap script and
    command modules (each is named; every other finding fails)."""
    result = cli("lint", repo_root)
    pending = [f for f in findings_of(result)
               if PENDING_MODULE.search(f[2]) or "${CLAUDE_PLUGIN_ROOT}/scripts/bootstrap.sh does not exist" in f[2]]
    unexpected = [f for f in findings_of(result) if f not in pending]
    assert not unexpected, result
    assert result.code == (1 if pending else 0), result
    if not pending:
        assert "clean" in result.out


def test_copy_is_clean(baseline):
    unexpected = [f for f in baseline if not PENDING_MODULE.search(f[2])]
    assert not unexpected, unexpected


# ---------------------------------------------------------------- planted faults, one each


def test_bad_name(cli, plugin):
    skill = plugin / GRPO_SKILL
    replace_once(skill, "name: grpo-rlvr-training", "name: GRPO_RLVR")
    assert_planted(cli, plugin, str(GRPO_SKILL), "must equal the skill's folder name", line=2)
    assert_planted(cli, plugin, str(GRPO_SKILL), "lowercase letters, digits and single '-'", line=2)


def test_double_hyphen_name_matching_its_folder(cli, plugin):
    old = plugin / "skills" / "eval-harness-first"
    new = plugin / "skills" / "eval--harness"
    old.rename(new)
    replace_once(new / "SKILL.md", "name: eval-harness-first", "name: eval--harness")
    assert_planted(cli, plugin, "skills/eval--harness/SKILL.md", "no leading, trailing or double '-'")


def test_long_description(cli, plugin):
    skill = plugin / "skills" / "lora-qlora-recipes" / "SKILL.md"
    long_desc = "Trains adapters for language models on demonstrations. Use when " + "x " * 520
    text = skill.read_text()
    text = re.sub(r"^description: .*$", "description: " + long_desc.strip(), text, count=1, flags=re.M)
    skill.write_text(text)
    assert_planted(cli, plugin, "skills/lora-qlora-recipes/SKILL.md", "at most 1024", line=3)


def test_description_with_angle_brackets(cli, plugin):
    skill = plugin / "skills" / "preference-optimization" / "SKILL.md"
    replace_once(skill, "Gives a preference-optimization recipe", "Gives a <b>preference</b> recipe")
    assert_planted(cli, plugin, "skills/preference-optimization/SKILL.md", "must not contain '<' or '>'")


def test_description_without_when(cli, plugin):
    skill = plugin / "skills" / "eval-harness-first" / "SKILL.md"
    text = re.sub(r"^description: .*$", "description: Builds an evaluation harness and calibrates a judge.",
                  skill.read_text(), count=1, flags=re.M)
    skill.write_text(text)
    assert_planted(cli, plugin, "skills/eval-harness-first/SKILL.md", "must say WHEN", line=3)


def test_disallowed_frontmatter_key(cli, plugin):
    skill = plugin / GRPO_SKILL
    replace_once(skill, "license: Apache-2.0\n", "license: Apache-2.0\nversion: 1.0\n")
    assert_planted(cli, plugin, str(GRPO_SKILL), "frontmatter key 'version' is not allowed", line=5)


def test_body_too_long(cli, plugin):
    skill = plugin / "skills" / "lora-qlora-recipes" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nfiller line\n" * 500)
    assert_planted(cli, plugin, "skills/lora-qlora-recipes/SKILL.md", "at most 500")


def test_broken_relative_link(cli, plugin):
    skill = plugin / GRPO_SKILL
    replace_once(skill, "## Related skills\n", "## Related skills\n\nSee [the guide](../../references/nope.md).\n")
    assert_planted(cli, plugin, str(GRPO_SKILL), "broken link: '../../references/nope.md'",
                   line=line_of(skill, "references/nope.md"))


def test_broken_anchors(cli, plugin):
    skill = plugin / GRPO_SKILL
    replace_once(skill, "## Related skills\n", "## Related skills\n\nSee [gate](#the-inspection-rul) and "
                 "[routes](../finetuning-method-selection/SKILL.md#the-route) and [ok](#choosing-a-variant).\n")
    line = line_of(skill, "#the-inspection-rul)")
    assert_planted(cli, plugin, str(GRPO_SKILL), "this file has no heading '#the-inspection-rul'", line=line)
    assert_planted(cli, plugin, str(GRPO_SKILL), "../finetuning-method-selection/SKILL.md has no heading "
                   "'#the-route'", line=line)
    assert not [f for f in findings_of(cli("lint", plugin)) if "choosing-a-variant" in f[2]]


def test_heading_anchors():
    text = "# Title\n## 1. Fix the `eval` set\n```\n# not a heading\n```\n## Title\n### Title ###\n"
    assert lint.heading_anchors(text) == {"title", "1-fix-the-eval-set", "title-1", "title-2"}


def test_broken_plugin_root_path(cli, plugin):
    agent = plugin / "agents" / "llm-finetuning-training-engineer.md"
    agent.write_text(agent.read_text() + "\nRun `${CLAUDE_PLUGIN_ROOT}/scripts/missing.sh` first.\n")
    assert_planted(cli, plugin, "agents/llm-finetuning-training-engineer.md",
                   "${CLAUDE_PLUGIN_ROOT}/scripts/missing.sh does not exist")


def test_unknown_grpo_config_kwarg(cli, plugin):
    import trl

    skill = plugin / GRPO_RECIPE
    # the recipe block is generated; plant the typo wherever its num_generations keyword sits
    skill.write_text(re.sub(r"\bnum_generations=", "num_generation=", skill.read_text(), count=1))
    assert_planted(cli, plugin, str(GRPO_RECIPE),
                   f"GRPOConfig has no field 'num_generation' in TRL {trl.__version__}; did you mean "
                   "'num_generations'?", line=line_of(skill, "num_generation="))


def test_renamed_sft_kwarg_in_sibling_skill(cli, plugin):
    # max_seq_length was renamed max_length in TRL: exactly the drift the lint exists to catch.
    skill = plugin / "skills" / "lora-qlora-recipes" / "SKILL.md"
    replace_once(skill, "    max_length=2048,  # tokens per example", "    max_seq_length=2048,  # tokens per example")
    assert_planted(cli, plugin, "skills/lora-qlora-recipes/SKILL.md", "SFTConfig has no field 'max_seq_length'",
                   line=line_of(skill, "max_seq_length=2048"))


def test_unknown_lora_config_kwarg(cli, plugin):
    import peft

    skill = plugin / "skills" / "lora-qlora-recipes" / "SKILL.md"
    replace_once(skill, "    lora_dropout=0.05,", "    dropout=0.05,")
    assert_planted(cli, plugin, "skills/lora-qlora-recipes/SKILL.md",
                   f"LoraConfig has no field 'dropout' in peft {peft.__version__}")


def test_unknown_trainer_kwarg(cli, plugin):
    skill = plugin / "skills" / "preference-optimization" / "SKILL.md"
    replace_once(skill, "    train_dataset=pairs[\"train\"],", "    training_dataset=pairs[\"train\"],")
    assert_planted(cli, plugin, "skills/preference-optimization/SKILL.md",
                   "DPOTrainer has no field 'training_dataset'")


def test_python_block_syntax_error(cli, plugin):
    skill = plugin / GRPO_RECIPE
    skill.write_text(skill.read_text().replace("trainer.train()", "trainer.train(", 1))
    assert_planted(cli, plugin, str(GRPO_RECIPE), "python block does not compile")


def test_syntax_error_line_points_into_the_block(cli, plugin):
    skill = plugin / "skills" / "eval-harness-first" / "SKILL.md"
    replace_once(skill, "    passed = sum(", "    passed = = sum(")
    assert_planted(cli, plugin, "skills/eval-harness-first/SKILL.md", "does not compile",
                   line=line_of(skill, "passed = = sum("))


def test_agent_frontmatter_must_parse(cli, plugin):
    agent = plugin / "agents" / "llm-finetuning-training-engineer.md"
    replace_once(agent, "model: sonnet\n", "model: [sonnet\n")
    assert_planted(cli, plugin, "agents/llm-finetuning-training-engineer.md", "frontmatter is not valid YAML")


def test_commands_are_linted(cli, plugin):
    commands = plugin / "commands"
    commands.mkdir(exist_ok=True)
    (commands / "broken.md").write_text("---\ndescription: [unclosed\n---\nBody\n")
    (commands / "nodesc.md").write_text("---\nallowed-tools: 3\n---\nBody with [a link](missing.md)\n")
    assert_planted(cli, plugin, "commands/broken.md", "frontmatter is not valid YAML")
    assert_planted(cli, plugin, "commands/nodesc.md", "command needs a 'description'")
    assert_planted(cli, plugin, "commands/nodesc.md", "allowed-tools must be a string or a list")
    assert_planted(cli, plugin, "commands/nodesc.md", "broken link: 'missing.md'", line=4)


def test_command_allowed_tools_must_be_scoped(cli, plugin, baseline):
    commands = plugin / "commands"
    commands.mkdir(exist_ok=True)
    (commands / "open.md").write_text("---\ndescription: Does things.\nallowed-tools: Read, Bash\n---\nBody\n")
    (commands / "star.md").write_text("---\ndescription: Does things.\nallowed-tools: [\"Bash(*)\"]\n---\nBody\n")
    (commands / "scoped.md").write_text(
        "---\ndescription: Does things.\nallowed-tools: Read, Bash(${CLAUDE_PLUGIN_ROOT}/scripts/bootstrap.sh:*), "
        "Bash(${CLAUDE_PLUGIN_DATA}/venv/bin/finetune:*)\n---\nBody\n")
    assert_planted(cli, plugin, "commands/open.md", "allowed-tools rule 'Bash' allows any shell command", line=3)
    assert_planted(cli, plugin, "commands/star.md", "allowed-tools rule 'Bash(*)' allows any shell command")
    assert not [f for f in new_findings(cli, plugin, baseline) if f[0] == "commands/scoped.md"]


def test_command_rules_match_the_calls_as_written(cli, plugin, baseline):
    commands = plugin / "commands"
    commands.mkdir(exist_ok=True)
    call = '"${CLAUDE_PLUGIN_DATA}/venv/bin/finetune" route -o "runs/x"'
    body = f"\n```bash\n{call}\n```\n"
    (commands / "unquoted.md").write_text(  # the issue-19 bug: quoted calls, an unquoted rule
        "---\ndescription: Does things.\nallowed-tools:\n  - Bash(${CLAUDE_PLUGIN_DATA}/venv/bin/finetune:*)\n"
        "---\n" + body)
    (commands / "task.md").write_text("---\ndescription: Does things.\nallowed-tools: Read, Task\n---\nBody\n")
    (commands / "quoted.md").write_text(
        "---\ndescription: Does things.\nallowed-tools:\n  - Agent\n"
        "  - 'Bash(\"${CLAUDE_PLUGIN_DATA}/venv/bin/finetune\" route:*)'\n---\n" + body)
    assert_planted(cli, plugin, "commands/unquoted.md", "matches no command the body runs")
    assert_planted(cli, plugin, "commands/task.md", "the subagent tool is 'Agent'")
    assert not [f for f in new_findings(cli, plugin, baseline) if f[0] == "commands/quoted.md"]


def test_citations_ship_and_long_references_have_a_toc(cli, plugin):
    ref = plugin / "references" / "run-spec.md"
    ref.write_text(ref.read_text().replace("<!-- generated:toc:start -->", "<!-- toc was here -->")
                   + "\nFigures: ../outside/reference/memory-figures.md (inside: ../skills/grpo-rlvr-training/SKILL.md)\n")
    assert_planted(cli, plugin, "references/run-spec.md", "no table of contents at the top", line=1)
    assert_planted(cli, plugin, "references/run-spec.md", "'../outside/reference/memory-figures.md', which does not "
                   "ship with the plugin", line=line_of(ref, "Figures: ../outside"))
    assert not [f for f in new_findings(cli, plugin, set()) if "../skills/" in f[2]]


def test_links_inside_code_blocks_are_not_links(cli, plugin, baseline):
    skill = plugin / "skills" / "eval-harness-first" / "SKILL.md"
    skill.write_text(skill.read_text() + "\n```text\n[not a link](nowhere.md)\n```\n")
    assert new_findings(cli, plugin, baseline) == []


def test_cli_references_must_exist(cli, plugin):
    skill = plugin / "skills" / "eval-harness-first" / "SKILL.md"
    skill.write_text(skill.read_text() + textwrap.dedent("""
        Run `finetune inspect scroe RUN` and then:

        ```bash
        "$FT" route --verifyable yes -o runs/x
        ${CLAUDE_PLUGIN_DATA}/venv/bin/finetune trian SPEC
        "$FT" inspect gate runs/x | tee gate.log   # text after a pipe is not the command's
        ```
        """))
    rel = "skills/eval-harness-first/SKILL.md"
    assert_planted(cli, plugin, rel, "'finetune inspect scroe' is not a command (verbs: sample, score",
                   line=line_of(skill, "inspect scroe"))
    assert_planted(cli, plugin, rel, "'finetune route' has no option '--verifyable'; did you mean '--verifiable'?",
                   line=line_of(skill, "--verifyable"))
    assert_planted(cli, plugin, rel, "'finetune trian' is not a command group", line=line_of(skill, "trian"))
    assert not [f for f in findings_of(cli("lint", plugin)) if f[1] == line_of(skill, "tee gate.log")]


def test_cli_reference_parsing():
    problem = lint.cli_reference_problem
    assert problem("finetune route --verifiable yes --base-success sometimes -o runs/x") is None
    assert problem('"$FT" inspect review RUN [--format md\\|html\\|terminal]') is None
    assert problem("finetune inspect") is None  # the group named on its own
    assert problem("finetune inspect ...") is None and problem("finetune inspect --help") is None
    assert "needs a verb" in problem("finetune inspect --format md")
    assert "no option '--fromat'" in problem("finetune inspect review RUN --fromat md")
    assert problem("from finetune import route") is None  # not a command line
    assert problem("pip install finetune") is None


def test_plugin_root_lints_plugin_content_not_fixtures(cli, plugin, baseline):
    fixtures = plugin / "tests" / "data"
    fixtures.mkdir(parents=True)
    (fixtures / "bad.md").write_text("[deliberately broken](nowhere.md)\n")
    assert new_findings(cli, plugin, baseline) == []
    result = cli("lint", plugin / "tests")  # asked for explicitly, it is linted
    assert result.code == 1 and "tests/data/bad.md:1: broken link" in result.out


def test_single_file_and_bad_path(cli, plugin, baseline):
    result = cli("lint", plugin / "skills" / "lora-qlora-recipes" / "SKILL.md")
    assert result.code == 0, result
    result = cli("lint", plugin / "no-such-dir")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "no such file or directory" in result.err


# ---------------------------------------------------------------- units


def test_code_block_lines():
    text = "intro\n\n```python\nx = 1\ny = (\n```\n\n~~~\nplain\n~~~\n"
    blocks = list(lint.code_blocks(text))
    assert [(b.lang, b.first_line) for b in blocks] == [("python", 4), ("", 9)]
    findings = lint.check_code_blocks(Path("f.md"), text)
    assert [(f.line, "does not compile" in f.message) for f in findings] == [(5, True)]


def test_lint_does_not_import_trl_without_a_checked_call(tmp_path):
    """A plugin whose blocks call no TRL class is linted without importing torch or TRL (fast CI)."""
    root = tmp_path / "p"
    (root / ".claude-plugin").mkdir(parents=True)
    skill = root / "skills" / "tiny-skill"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(textwrap.dedent("""\
        ---
        name: tiny-skill
        description: Prints a greeting for the test-suite. Use when testing the lint.
        ---
        ```python
        print("hello")
        ```

        Then run `finetune route --verifiable yes` and `finetune inspect gate RUN`.
        """))
    code = ("import sys; from pathlib import Path; from finetune.lint import lint; "
            f"assert lint(Path({str(root)!r})) == []; "
            "print(sorted(m for m in ('torch', 'trl', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
