"""Hostile spec strings render as data, never as code.

Every string field a spec can set is filled with a payload that tries to close every kind of quote,
docstring and comment, to start new lines (\\n, \\r, U+2028, U+0085), and to run shell and template
substitutions. Then every template is rendered — rewards.py for every reward type, the config for
every target (one GPU, eight GPUs, two nodes, DGX Spark, CPU) — and the outputs are compiled
(`compile`, `bash -n`, YAML/JSON loaders), the rendered rewards.py is IMPORTED in a subprocess and
every function called, train.py is run with --help, and no marker file may appear. The values must
also come back unchanged (the column names reach the reward functions, the system prompt and
model reach train.py's constants).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from finetune.literals import check_text

MARK = "pwned"


def hostile(tag: str) -> str:
    """One payload per field (tag keeps them distinct), NUL-free, no '/'."""
    run = f'__import__("os").system("touch {MARK}-{tag}")'
    run1 = f"__import__('os').system('touch {MARK}-{tag}')"
    return (f'{tag}"""+str({run})+"""' + f"'''+str({run1})+'''" + f'"+str({run})+"' + f"'+str({run1})+'"
            + f"\n{run}\n\u2028{run}\u2029\r{run}\x85{run}\x0b"
            + f"$(touch {MARK}-{tag})`touch {MARK}-{tag}`${{IFS}}{{{{ 7*7 }}}}{{% raw %}}<script>#[x](y) \\")


def hostile_short(tag: str) -> str:
    """A payload under 255 bytes (one path component), for fields also tried as a local folder name."""
    run = f'__import__("os").system("touch {MARK}-{tag}")'
    return f'{tag}"""+str({run})+"""\'+str({run})+\'\n{run}\u2028$(touch {MARK}-{tag})`touch x`#'


def _markers(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob(f"{MARK}*") if not p.name.startswith(f"{MARK}-spec"))


REWARD_FIELDS = {
    "format": lambda t: {"type": "format", "pattern": "answer_tag"},
    "exact_match": lambda t: {"type": "exact_match", "answer_column": hostile(f"{t}-answer"), "extract": "answer_tag"},
    "math": lambda t: {"type": "math", "answer_column": hostile(f"{t}-answer"), "extract": "answer_tag",
                       "timeout_s": 2.0, "workers": 1},
    "json_schema": lambda t: {"type": "json_schema", "partial_credit": True,
                              "schema": {"type": "object", "description": hostile(f"{t}-desc"),
                                         "properties": {hostile(f"{t}-prop"): {"type": "string"}}}},
    "json_schema_column": lambda t: {"type": "json_schema", "schema_column": hostile(f"{t}-schema")},
    "unit_tests": lambda t: {"type": "unit_tests", "tests_column": hostile(f"{t}-tests"),
                             "entry_point_column": hostile(f"{t}-entry"), "timeout_s": 2.0},
    "judge": lambda t: {"type": "judge", "endpoint": "http://127.0.0.1:9/" + hostile(f"{t}-url"),
                        "model": hostile(f"{t}-model"), "rubric": hostile(f"{t}-rubric"), "retries": 0,
                        "timeout_s": 0.5, "cache": True, "api_key_env": hostile(f"{t}-key")},
    "length_penalty": lambda t: {"type": "length_penalty", "mode": "soft_overlong", "overlong_buffer": 4,
                                 "wraps": "fmt"},
}


def _reward_spec(kinds: list[str]) -> list[dict]:
    rewards = [{"name": "fmt", "type": "format", "pattern": "answer_tag", "weight": 0.5}]
    for i, kind in enumerate(kinds):
        if kind != "format":
            rewards.append({"name": f"r{i}_{kind}", **REWARD_FIELDS[kind](f"r{i}")})
    return rewards


CALL_REWARDS = textwrap.dedent('''
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("rewards_under_test", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    columns = json.loads(open(sys.argv[2], encoding="utf-8").read())
    module.disable_caches()
    out = {}
    for f in module.REWARD_FUNCS:
        out[f.__name__] = f(prompts=["What is 1?"] * 2, completions=["<answer>1</answer>", "<answer>2</answer>"],
                            completion_ids=[[1, 2], [1, 2, 3]], **columns)
    print(json.dumps(out))
''')


@pytest.mark.slow
def test_rewards_render_every_type_with_hostile_strings(tmp_path, cli, monkeypatch):
    kinds = [k for k in REWARD_FIELDS if k != "format"]
    rewards = _reward_spec(kinds)
    # render refuses a judge's api_key_env the person did not allow (judge_key_envs / FINETUNE_JUDGE_KEY_ENVS):
    # the person allows the hostile name itself, so it is still rendered (and read) as one literal
    judge_key = next(r["api_key_env"] for r in rewards if r["type"] == "judge")
    assert "," not in judge_key  # the setting is comma-separated
    monkeypatch.setenv("FINETUNE_JUDGE_KEY_ENVS", judge_key)
    spec = {"name": "inj", "model": "Qwen/Qwen3-1.7B",
            "dataset": {"path": "data.jsonl", "prompt_column": "prompt", "answer_column": None}, "rewards": rewards}
    spec_path = tmp_path / ("spec" + hostile("spec").replace("\x85", "").replace("\u2028", "")[:60] + ".yaml")
    spec_path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    res = cli("rewards", "render", spec_path, "-o", tmp_path)
    assert res.code == 0, res
    source = (tmp_path / "rewards.py").read_text(encoding="utf-8")
    compile(source, "rewards.py", "exec")
    ast.parse(source)
    # every column a reward reads arrives under its hostile name: the exact-match one proves the round trip
    columns = {}
    for r in rewards:
        for key in ("answer_column", "schema_column", "tests_column", "entry_point_column"):
            if key in r:
                columns[r[key]] = {"answer_column": ["1", "1"], "schema_column": ['{"type": "object"}'] * 2,
                                   "tests_column": [["assert f() == 1"]] * 2,
                                   "entry_point_column": ["f", "f"]}[key]
    (tmp_path / "columns.json").write_text(json.dumps(columns), encoding="utf-8")
    (tmp_path / "call.py").write_text(CALL_REWARDS, encoding="utf-8")
    proc = subprocess.run([sys.executable, "call.py", str(tmp_path / "rewards.py"), "columns.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = json.loads(proc.stdout.strip().splitlines()[-1])
    assert scores["r0_exact_match"] == [1.0, 0.0]  # the hostile column name reached the function intact
    assert set(scores) == {r["name"] for r in rewards}
    assert _markers(tmp_path) == []
    # the judge's hostile rubric/model/endpoint are one literal each
    tree = ast.parse(source)
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    judge = next(r for r in rewards if r["type"] == "judge")
    assert {judge["rubric"], judge["model"], judge["endpoint"], judge["api_key_env"]} <= consts


CONFIG_TARGETS = {
    "h100-1gpu": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
    "h100-8gpu": {"profile": "h100-80gb", "gpus": 8, "nodes": 1},
    "h100-2node-8gpu": {"profile": "h100-80gb", "gpus": 8, "nodes": 2},
    "dgx-spark": {"profile": "dgx-spark", "gpus": 1, "nodes": 1},
    "cpu": {"profile": "cpu", "gpus": 0, "nodes": 1},
}


def _config_run(root: Path, hardware: dict, method: str) -> tuple[Path, dict]:
    from finetune.models import _bundled_config

    root.mkdir(parents=True)
    prompt_col, answer_col = hostile("prompt"), hostile("answer")
    data_name = "data" + hostile("data").replace("\x85", "").replace("\u2028", "").replace("\u2029", "")[:80]
    rows = [{prompt_col: f"What is {i}?", answer_col: str(i)} for i in range(8)]
    (root / f"{data_name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = {
        "name": "inj", "model": hostile_short("model"), "model_config": str(_bundled_config("Qwen/Qwen3-1.7B")),
        "method": method,
        "dataset": {"path": f"{data_name}.jsonl", "prompt_column": prompt_col, "answer_column": answer_col,
                    "system_prompt": hostile("system")},
        "rewards": [{"name": "fmt", "type": "format", "pattern": "answer_tag", "weight": 0.5},
                    {"name": "correct", "type": "exact_match", "answer_column": answer_col,
                     "extract": "answer_tag"}],
        "hardware": hardware,
        "generation": {"max_prompt_length": 64, "max_completion_length": 32},
        "overrides": {"run_name": hostile("runname")},
    }
    if method == "lora":
        # a module name the model lacks is refused at render (lora.target_modules is checked against the
        # model): the payload rides in a regular expression that still matches the model's q_proj layers
        spec["lora"] = {"target_modules": r".*\.(?:q_proj|" + re.escape(hostile("module")) + ")"}
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path, spec


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(CONFIG_TARGETS))
def test_config_render_every_target_with_hostile_strings(tmp_path, cli, target):
    method = "lora" if target in ("h100-1gpu", "cpu") else "full"
    spec_path, spec = _config_run(tmp_path / "run", CONFIG_TARGETS[target], method)
    res = cli("rewards", "render", spec_path)
    assert res.code == 0, res
    res = cli("config", "render", spec_path, "--no-gate")
    assert res.code == 0, res
    config = spec_path.parent / "config"
    train = (config / "train.py").read_text(encoding="utf-8")
    tree = ast.parse(train)
    consts = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and t.id in ("MODEL", "SAMPLING", "DATASET")}
    assert consts["SAMPLING"]["system_prompt"] == spec["dataset"]["system_prompt"]  # SYSTEM_PROMPT reads it
    assert consts["DATASET"]["prompt_column"] == spec["dataset"]["prompt_column"]
    assert consts["MODEL"] == spec["model"]
    for name in sorted(p.name for p in config.iterdir()):
        text = (config / name).read_text(encoding="utf-8")
        if name.endswith(".py"):
            compile(text, name, "exec")
        elif name.endswith(".sh"):
            subprocess.run(["bash", "-n", str(config / name)], check=True)
        elif name.endswith((".yaml", ".yml")):
            loaded = yaml.safe_load(text)
            if name == "grpo_config.yaml":
                assert loaded["run_name"] == spec["overrides"]["run_name"]
                assert loaded["model_name_or_path"] == spec["model"]
        elif name.endswith(".json"):
            json.loads(text)
        elif name.endswith(".md"):
            html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
            assert "<script>" not in html and '<a href="y"' not in html, name  # escaped, or inside a code span
    proc = subprocess.run([sys.executable, str(config / "train.py"), "--help"], cwd=spec_path.parent,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _markers(tmp_path) == []


def test_a_model_name_no_filesystem_can_hold_is_one_line_exit_2(tmp_path, cli):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "inj", "model": "m" * 300, "dataset": {"path": "d.jsonl"},
                                    "rewards": [{"name": "fmt", "type": "format", "pattern": "answer_tag"}]}))
    res = cli("rewards", "render", spec)
    assert res.code == 2 and "model" in res.err and "Traceback" not in res.err, res
    assert len(hostile_short("model").encode()) < 255


def test_a_lone_surrogate_in_the_spec_is_one_line_exit_2(tmp_path, cli):
    spec = tmp_path / "spec.yaml"
    spec.write_text('name: inj\nmodel: Qwen/Qwen3-1.7B\ndataset: {path: d.jsonl, system_prompt: "a\\ud800b"}\n'
                    'rewards: [{name: fmt, type: format, pattern: answer_tag}]\n', encoding="utf-8")
    for args in (("rewards", "render", spec), ("config", "render", spec, "--preview"), ("inspect", "sample", spec)):
        res = cli(*args)
        assert res.code == 2, res
        assert "Traceback" not in res.err and "dataset.system_prompt" in res.err, res
        assert len(res.err.strip().splitlines()) <= 2, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]
    assert check_text({"a": ["ok", "x\udc80"]}) == ["a[1]"]
