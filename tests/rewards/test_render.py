"""`finetune rewards render`: standalone output, interface, atomic writes, bad specs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from reward_helpers import reward_specs

from finetune.rewards.render import RENDERED, render_sources

SPEC = textwrap.dedent("""\
    name: toy-arith
    model: ./models/tiny
    dataset: {path: data/train.jsonl, prompt_column: prompt}
    rewards:
      - {name: format, type: format, pattern: think_answer, weight: 0.2}
      - {name: correctness, type: exact_match, answer_column: answer, weight: 1.0}
      - {name: math_ok, type: math, answer_column: answer, extract: answer_tag}
      - {name: schema_ok, type: json_schema, schema: {type: object}, extract: answer_tag}
      - {name: tests_ok, type: unit_tests, tests_column: tests, min_isolation: process}
      - {name: rubric, type: judge, model: judge, rubric: "Score it"}
      - {name: overlong, type: length_penalty, overlong_buffer: 32}
    generation: {max_completion_length: 256}
""")


@pytest.fixture
def spec_file(tmp_path) -> Path:
    path = tmp_path / "run" / "spec.yaml"
    path.parent.mkdir()
    path.write_text(SPEC)
    return path


def test_cli_renders_standalone_files(cli, spec_file, tmp_path):
    out = tmp_path / "out"
    result = cli("rewards", "render", spec_file, "-o", out)
    assert result.code == 0, result
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".py") == ["rewards.py", "rewards_answers.py", "rewards_code.py",
                                                           "rewards_mathpool.py", "rewards_meta.py", "rewards_sandbox.py"]
    text = (out / "rewards.py").read_text()
    header = ast.get_docstring(ast.parse(text))
    assert "toy-arith" in header and "spec.yaml" in header and "llm-finetuning 0.1.0" in header
    for requirement in ("math-verify==0.9.0", "jsonschema==4.26.0", "trl==1.16.0", "rewards_mathpool.py",
                        "rewards_sandbox.py"):
        assert requirement in header
    assert sorted(json.loads((out / RENDERED).read_text())) == sorted(p.name for p in out.glob("*.py"))
    for file in out.glob("*.py"):  # never imports this plugin
        tree = ast.parse(file.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert "finetune" not in imported, file
    # Import it in a clean interpreter, from its folder only, as `trl grpo` does through PYTHONPATH.
    # Picklable by reference, as TRL's async rollout worker needs to send reward functions to a child.
    probe = ("import sys, pickle, rewards; assert 'finetune' not in sys.modules; import json; "
             "assert pickle.loads(pickle.dumps(rewards.REWARD_FUNCS)) == rewards.REWARD_FUNCS; "
             "print(json.dumps([[f.__name__ for f in rewards.REWARD_FUNCS], rewards.REWARD_WEIGHTS, "
             "[m.as_dict() for m in rewards.REWARD_META]]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=out, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(out), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    names, weights, meta = json.loads(done.stdout)
    assert names == ["format", "correctness", "math_ok", "schema_ok", "tests_ok", "rubric", "overlong"]
    assert weights == [0.2, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert [set(m) for m in meta] == [{"name", "type", "role", "weight", "threshold", "min", "max", "gated",
                                       "episode"}] * 7
    # correctness rewards in a spec with a format reward score 0 on malformed output (the gate reads this)
    assert [m["gated"] for m in meta] == [False] + [True] * 5 + [False]
    assert [m["episode"] for m in meta] == [False] * 7  # no environment reward here
    assert [m["role"] for m in meta] == ["format"] + ["correctness"] * 5 + ["shaping"]
    assert meta[-1]["min"] == -0.1 and meta[-1]["max"] == 0.0  # bounded by the lightest format weight


def test_default_run_dir_and_stale_helpers_removed(cli, spec_file):
    assert cli("rewards", "render", spec_file).code == 0
    assert (spec_file.parent / "rewards_mathpool.py").is_file()
    spec_file.write_text(SPEC.split("  - {name: math_ok")[0] + "generation: {max_completion_length: 256}\n")
    assert cli("rewards", "render", spec_file.parent).code == 0
    assert sorted(p.name for p in spec_file.parent.glob("rewards*.py")) == ["rewards.py", "rewards_answers.py",
                                                                           "rewards_meta.py"]


@pytest.mark.parametrize("bad, field", [
    ("      - {name: format, type: format, pattern: nope}", "rewards[0].pattern"),
    ("      - {name: 1bad, type: format}", "rewards[0].name"),
    ("      - {name: len, type: format}", "rewards[0].name"),
    ("      - {name: a, type: exact_match, threshold: 1.5}", "rewards[0].threshold"),
    ("      - {name: a, type: unit_tests, threshold: 0.4}", "rewards[0]"),
    ("      - {name: a, type: json_schema}", "rewards[0]"),
    ("      - {name: a, type: json_schema, schema: {type: 12}}", "rewards[0].schema"),
    ("      - {name: a, type: json_schema, schema: {}, role: format, partial_credit: true}", "rewards[0]"),
    ("      - {name: a, type: exact_match, role: shaping}", "rewards[0].role"),
    ("      - {name: a, type: judge, model: m, rubric: r, endpoint: 'ftp://x'}", "rewards[0].endpoint"),
    ("      - {name: a, type: length_penalty, mode: budget}", "rewards[0]"),
    ("      - {name: a, type: length_penalty, wraps: ghost}", "rewards[0].wraps"),
    ("      - {name: a, type: exact_match, weight: 0}", "rewards[0].weight"),
    ("      - {name: a, type: telepathy}", "rewards[0]"),
])
def test_bad_spec_is_one_line_exit_2_nothing_written(cli, tmp_path, bad, field):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: bad\nmodel: m\ndataset: {path: d.jsonl}\nrewards:\n" + bad.strip().join(["  ", "\n"]))
    out = tmp_path / "out"
    result = cli("rewards", "render", spec, "-o", out)
    assert result.code == 2, result
    line = result.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"{field}" in line and f"{spec}:" in line
    assert not out.exists()


def test_render_refuses_to_overwrite_or_remove_a_rewards_module_it_did_not_write(cli, spec_file, tmp_path):
    out = tmp_path / "out"
    assert cli("rewards", "render", spec_file, "-o", out).code == 0
    assert cli("rewards", "render", spec_file, "-o", out).code == 0  # its own files: rendered over
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "rewards_mine.py").write_text("def helper():\n    return 1\n")  # the user's own module
    r = cli("rewards", "render", spec_file, "-o", out)
    assert r.code == 2 and "rewards_mine.py" in r.err and "remove" in r.err and len(r.err.strip().splitlines()) == 1
    (out / "rewards_mine.py").unlink()
    (out / RENDERED).unlink()
    (out / "rewards_meta.py").write_text("# mine\n")  # not in a manifest, not what render writes
    r = cli("rewards", "render", spec_file, "-o", out)
    assert r.code == 2 and "rewards_meta.py" in r.err and "overwrite" in r.err, r.err
    assert (out / "rewards_meta.py").read_text() == "# mine\n"
    assert {p.name for p in out.iterdir()} == set(before) - {RENDERED}


def test_rendered_code_for_every_type_alone_imports_only_what_it_uses():
    from finetune.rewards.reference import DOC_EXAMPLES

    example_spec = Path(__file__).resolve().parents[2] / "examples" / "python-reward" / "spec.yaml"
    for entry in DOC_EXAMPLES.values():
        # a `type: python` example needs its user file: the worked example's folder has it; a `type:
        # environment` one needs the spec's environment (the calculator of examples/tool-environment/)
        if entry["type"] == "environment":
            from finetune.spec import EnvironmentSpec

            env = EnvironmentSpec.model_validate({"file": "env.py", "class": "Calculator"})
            text = render_sources(reward_specs([entry]), source_path=example_spec.parents[1] / "tool-environment" /
                                  "spec.yaml", tool_env=env)["rewards.py"]
        else:
            text = render_sources(reward_specs([entry]), source_path=example_spec)["rewards.py"]
        assert text.count(f"def {entry['name']}(") == 1
        tree = ast.parse(text)
        imported = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import)
                    for alias in node.names}
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert imported <= used | {"rewards_mathpool", "rewards_sandbox", "rewards_answers", "rewards_user_sql_matches",
                                   "rewards_env", "rewards_toolcall"} and "annotations" not in used, \
            (entry["type"], sorted(imported - used))


R1_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
               "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
PLAIN_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}A:{% endif %}"


@pytest.mark.parametrize("template, prefilled, ok", [
    (R1_TEMPLATE, False, False), (R1_TEMPLATE, True, True), (PLAIN_TEMPLATE, False, True), (PLAIN_TEMPLATE, True, False),
])
def test_prefilled_think_checked_against_the_chat_template(cli, tmp_path, template, prefilled, ok):
    """trl#6966: refuse a think_answer format reward that contradicts the model's chat template."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "eos_token": "<|end|>"}))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: t\nmodel: ./model\ndataset: {{path: d.jsonl}}\nrewards:\n"
                    f"  - {{name: format, type: format, pattern: think_answer, prefilled_think: {str(prefilled).lower()}}}\n")
    result = cli("rewards", "render", spec, "-o", tmp_path / "out")
    assert result.code == (0 if ok else 2), result
    if not ok:
        assert "rewards[0].prefilled_think" in result.err and f"set prefilled_think: {str(not prefilled).lower()}" \
            in result.err
        assert not (tmp_path / "out").exists()


def test_tiny_model_template_has_no_think_prefill(tiny_model_dir):
    from finetune.rewards.render import generation_prompt_suffix

    assert generation_prompt_suffix(tiny_model_dir).endswith("<|assistant|>")
