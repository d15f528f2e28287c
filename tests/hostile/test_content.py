"""Hostile content from samples, logs, model configs and pages: one line, exit 2, naming file and line.

Each case is what a model, a careless export or an attacker can put in a file the plugin reads; the
rule is the one of ``cases.check`` (exit 2, one ``error:`` line naming the place, no traceback, nothing
written), or, for outputs, that the output stays well-formed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cases import Case, check

IMPORT = ("inspect", "sample", "{spec}", "--import", "{tmp}/bad.jsonl")
GOOD = {"prompt": "What is 2+2?", "completion": "\\boxed{4}", "answer": "4"}


def _bad_import(second_line: str):
    """bad.jsonl beside the run: a good first line, then the hostile one (so the error must say line 2)."""
    def damage(run: Path) -> None:
        (run.parent / "bad.jsonl").write_text(json.dumps(GOOD) + "\n" + second_line + "\n", encoding="utf-8")
    return damage


def _nested(depth: int) -> str:
    """A good row with an extra column nested ``depth`` lists deep."""
    return json.dumps({**GOOD, "extra": ""}).replace('"extra": ""', '"extra": ' + "[" * depth + "]" * depth)


IMPORT_CASES = [
    Case("6-import", IMPORT, _bad_import(_nested(500)), "bad.jsonl:2", name="nested_500_extra_column"),
    Case("6-import", IMPORT, _bad_import(_nested(100_000)), "bad.jsonl:2", name="nested_100000"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "columns": {"meta": "[" * 40 + "]" * 40}})
                                         .replace('"' + "[" * 40 + "]" * 40 + '"', "[" * 40 + "]" * 40)),
         "nested more than", name="nested_40_in_columns"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "truncated": "yes"})), "'truncated'",
         name="truncated_string"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": -5})), "'completion_tokens'",
         name="negative_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": 3.5})), "'completion_tokens'",
         name="fractional_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": True})), "'completion_tokens'",
         name="bool_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "source": {"x": 1}})), "'source'", name="source_object"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "a \\ud800 b", "answer": "4"}'),
         "bad.jsonl:2", name="unpaired_surrogate_completion"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "c", "answer": "\\udfff"}'),
         "bad.jsonl:2", name="unpaired_surrogate_column"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "c", "\\ud83d": "4", "answer": "4"}'),
         "bad.jsonl:2", name="unpaired_surrogate_key"),
]


@pytest.mark.parametrize("case", IMPORT_CASES, ids=lambda c: c.id)
def test_hostile_import_is_one_line_naming_file_and_line(case, damaged):
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side)
    assert not problem, problem


def test_sandbox_names_import_from_the_runner_module_only():
    """In a fresh interpreter the runner's names come from `finetune.sandbox.runner` (one module, loaded once);
    the package re-exports none of them (a lazy re-export once recursed without end)."""
    import subprocess
    import sys

    scripts = str(Path(__file__).resolve().parents[2] / "scripts")
    code = (f"import sys; sys.path.insert(0, {scripts!r}); "
            "from finetune.sandbox.runner import SandboxPool, StdioJob, run_python; "
            "from finetune.sandbox import runner, runner_source; import finetune.sandbox as package; "
            "print(SandboxPool.__name__, runner.SandboxPool is SandboxPool, hasattr(package, 'StdioJob'))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "SandboxPool True False", out.stderr[-500:]


# ------------------------------------------------------------------------------------- review.html --

# What a model (or a prompt author) can write that an HTML5 parser treats specially inside <script>.
HOSTILE_TEXTS = [
    "<!--<script>", "x <!-- <script> y", "<!--<script></script>-->", "</script><script>document.title='pwned'</script>",
    "</SCRIPT >", "</script\n>", "<![CDATA[ ]]>", "--><script>", "&lt;&amp;&#x3c;", "\u2028\u2029 line separators",
    "<!-- unclosed comment <script src=x>", "<img src=x onerror=alert(1)>",
]


@pytest.mark.browser
def test_review_page_parses_whole_with_hostile_completions(base_run, tmp_path):
    """Chromium (an HTML5 parser) loads review.html built from completions, prompts and gold answers holding
    the strings above: no page error, every sample present, and each string shown exactly as written."""
    import shutil

    from playwright.sync_api import sync_playwright

    from finetune.cli import main
    from finetune.literals import visible

    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for row, text in zip(rows, HOSTILE_TEXTS):
        row["completion"] = f"{text}\n<answer>{text}</answer>"
        row["prompt"] = row["prompt"] + " " + text
    rows[0]["columns"]["answer"] = HOSTILE_TEXTS[0]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["inspect", "score", str(run)]) == 0
    assert main(["inspect", "review", str(run), "--format", "html", "-n", str(len(rows))]) == 0
    page_text = (run / "review.html").read_text()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((run / "review.html").as_uri())
            shown = page.evaluate("ITEMS.map(i => [i.id, i.completion, i.prompt])")
            scripts = page.evaluate("document.scripts.length")
            title = page.title()
        finally:
            browser.close()
    assert errors == [] and scripts == 2 and title != "pwned"
    by_id = {r["id"]: r for r in rows}
    assert len(shown) == len(rows)
    for sid, completion, prompt in shown:  # as written, U+2028/U+2029 marked (finetune.literals.visible)
        assert completion == visible(by_id[sid]["completion"]) and prompt == visible(by_id[sid]["prompt"])
    assert "<!--" not in page_text.split('<script id="data"')[1].split("</script>")[0]


# ---------------------------------------------------------------------------------------- diagnose --

def _huge_log(n: int = 24) -> dict:
    big = [1e308, -1e308, 1.7976931348623157e308, -1e300, 5e-324]
    return {"log_history": [{"step": i, "loss": big[i % 5], "reward": big[(i + 1) % 5], "entropy": big[(i + 2) % 5],
                             "completions/mean_length": big[(i + 3) % 5], "completions/clipped_ratio": big[i % 5],
                             "kl": big[(i + 4) % 5], "grad_norm": float("nan") if i % 7 == 0 else 1e308}
                            for i in range(1, n + 1)]}


DIAGNOSE_FILES = {
    "deep_trainer_state": ("trainer_state.json", '{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}", 2, ":1"),
    "deep_jsonl_line": ("metrics_copy.jsonl", '{"step": 1, "loss": 0.5}\n{"step": 2, "loss": ' + "[" * 100_000
                        + "]" * 100_000 + "}\n", 2, "metrics_copy.jsonl:2"),
    "deep_object_nesting": ("state.json", '{"log_history": [' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "]}", 2, ":1"),
    "extreme_losses": ("trainer_state.json", json.dumps(_huge_log()), 0, "curves.png"),
}


@pytest.mark.parametrize("name", sorted(DIAGNOSE_FILES))
def test_diagnose_hostile_logs(name, tmp_path, monkeypatch, capsys):
    """A log nested 100,000 deep: one line naming the file and line, exit 2. Losses of ±1e308: diagnosed
    and plotted (clipped), exit 0."""
    from finetune.cli import main

    filename, text, code, where = DIAGNOSE_FILES[name]
    (tmp_path / filename).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    got = main(["diagnose", str(tmp_path / filename)])
    captured = capsys.readouterr()
    assert got == code, captured.err[-800:]
    assert "Traceback" not in captured.err
    if code == 2:
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and where in lines[0], captured.err
        assert not (tmp_path / "diagnosis").exists()
    else:
        assert where in captured.out + captured.err
        png = next(tmp_path.rglob("curves.png"))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------- model config.json --

BUNDLED = Path(__file__).resolve().parents[2] / "scripts/finetune/data/model_configs/Qwen/Qwen3-1.7B/config.json"
HOSTILE_CONFIG = {
    "heads_zero": {"num_attention_heads": 0},
    "heads_negative": {"num_attention_heads": -16},
    "hidden_negative": {"hidden_size": -2048},
    "hidden_huge": {"hidden_size": 10 ** 30},
    "layers_string": {"num_hidden_layers": "28"},
    "layers_float": {"num_hidden_layers": 28.5},
    "vocab_bool": {"vocab_size": True},
    "vocab_huge": {"vocab_size": 2 ** 62},
    "kv_heads_zero": {"num_key_value_heads": 0},
    "head_dim_negative": {"head_dim": -128},
    "intermediate_list": {"intermediate_size": [6144]},
    "model_type_number": {"model_type": 3},
    "model_type_unknown": {"model_type": "no-such-architecture"},
    "experts_negative": {"num_experts": -8},
}


def _hostile_config(change: dict):
    def damage(run: Path) -> None:
        raw = json.loads(BUNDLED.read_text())
        raw.update(change)
        (run / "cfg").mkdir()
        (run / "cfg" / "config.json").write_text(json.dumps(raw))
        spec = run / "spec.yaml"
        spec.write_text(spec.read_text().replace("model: Qwen/Qwen3-1.7B\n",
                                                 "model: Qwen/Qwen3-1.7B\nmodel_config: cfg/config.json\n"))
    return damage


# every value through `memory`; config render reads the same loader, so four of them through it too
CONFIG_CASES = [Case("6-model-config", ("memory", "{spec}"), _hostile_config(change), "config.json",
                     name=f"memory_{name}") for name, change in HOSTILE_CONFIG.items()] + [
    Case("6-model-config", ("config", "render", "{spec}", "--preview", "--no-gate"), _hostile_config(HOSTILE_CONFIG[name]),
         "config.json", name=f"config_{name}") for name in ("heads_zero", "hidden_huge", "layers_string", "vocab_bool")]


@pytest.mark.parametrize("case", CONFIG_CASES, ids=lambda c: c.id)
def test_hostile_model_config_is_one_line(case, damaged):
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side)
    assert not problem, problem


@pytest.mark.parametrize("flag", ["--seq-len=-4096", "--seq-len=0", "--seq-len=1e9", "--seq-len=nan",
                                  "--batch=-1", "--gpus=0", "--lora-r=-8", "--gpu-memory-gib=-80"])
def test_memory_refuses_every_bad_number(flag, capsys):
    """Every numeric flag of `memory` is checked (a negative --seq-len printed a negative peak)."""
    from finetune.cli import main

    got = main(["memory", "--model", "Qwen/Qwen3-1.7B", "--trainer", "sft", flag])
    err = capsys.readouterr().err
    assert got == 2 and flag.split("=")[0] in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------- sample_info.json --

def _sample_info(text: str):
    def damage(run: Path) -> None:
        (run / "sample_info.json").write_text(text)
    return damage


INFO_CASES = [Case("6-sample-info", verb, _sample_info(text), "sample_info.json", code=code, name=f"{verb[1]}_{name}")
              for name, text, code in (("list", "[1, 2]", 2), ("string", '"samples"', 2), ("null", "null", 2),
                                       ("base_not_object", '{"imported_base": 5}', None),
                                       ("temperature_string", '{"imported_base": {"temperature": "hot"}}', 2))
              for verb in (("inspect", "score", "{run}"), ("inspect", "gate", "{run}"))
              if verb[1] == "score" or name in ("list", "temperature_string")]


@pytest.mark.parametrize("case", INFO_CASES, ids=lambda c: c.id)
def test_non_object_sample_info_is_one_line(case, damaged):
    """A sample_info.json that is not the object sampling writes: score and gate say so (or ignore a
    part they do not need), never a traceback."""
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side)
    assert not problem, problem


# ------------------------------------------------------------------------------ data filter's spec --

SECTION = {"path": "data.filtered.jsonl", "source": "data.jsonl", "k": 8, "keep": [0.1, 0.9],
           "note": "prompts kept: 12 / 40 — ‘quoted’ \\ back"}
SPEC_LAYOUTS = {
    "block": "# run spec\nname: toy  # the run\ndataset:\n  # where the prompts live\n  path: data.jsonl  # 40 rows\n"
             "  prompt_column: prompt\n\n# rewards below\nrewards:\n  - {name: f, type: format, pattern: answer_tag}\n",
    "block_last": "name: toy\nrewards: []\ndataset:\n    path: data.jsonl   # four-space indent, last in the file",
    "block_scalar_last": "name: toy\ndataset:\n  path: data.jsonl\n  system_prompt: |\n    Think, then answer.\n"
                         "# trailing comment\n",
    "flow": "# flow dataset\nname: toy\ndataset: {path: data.jsonl, prompt_column: prompt}  # inline\n# end\n",
    "filter_again_block": "name: toy\ndataset:\n  path: data.jsonl\n  filter:\n    path: old.jsonl\n    k: 4\n"
                          "  answer_column: answer  # keep me\n# after\n",
    "filter_again_flow": "name: toy  # note-on-name\ndataset:\n  filter: {path: old.jsonl}  # old\n  path: data.jsonl  # note-on-path\n",
}


@pytest.mark.parametrize("layout", sorted(SPEC_LAYOUTS))
def test_data_filter_keeps_spec_comments(layout, tmp_path):
    """`data filter` writes dataset.filter into spec.yaml: the loaded spec gains exactly that section and
    every comment line of the original survives (a safe_dump round trip dropped them all)."""
    import yaml

    from finetune.datafilter import _spec_files

    original = SPEC_LAYOUTS[layout]
    spec = tmp_path / "spec.yaml"
    spec.write_text(original, encoding="utf-8")
    files = _spec_files(spec, SECTION)
    text = files["spec.yaml"]
    expected = yaml.safe_load(original)
    expected["dataset"]["filter"] = SECTION
    assert yaml.safe_load(text) == expected
    comments = [c.split("#", 1)[1] for c in original.splitlines() if "#" in c and "filter" not in c]
    assert comments and all(c in text for c in comments), text
    assert files["spec.yaml.orig"] == original
