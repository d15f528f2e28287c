"""Prompt lengths for a spec with an environment: the tool schemas the chat template renders are part of every
prompt (estimated from their JSON without a local tokenizer), the system prompt too; a plain-text prompt with
an environment is refused (TRL runs tools only for chat prompts) by `config render`'s measurement and by
`inspect sample`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from finetune.config.dataset import _dataset_stats
from finetune.demo import tools as demo_tools
from finetune.errors import UserError
from finetune.inspect.sample import training_prompt
from finetune.spec import load_spec

MODEL = "example-org/not-on-this-machine-7b"  # no local tokenizer: lengths are estimated


def _spec(tmp_path: Path, prompt_as_text: bool, environment: bool, system: str | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    rows = demo_tools.rows(6, seed=2)
    if prompt_as_text:
        rows = [{**r, "prompt": r["prompt"][0]["content"]} for r in rows]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "env.py").write_text(demo_tools.ENV_SOURCE)
    data = {"name": "t", "model": MODEL, "dataset": {"path": "train.jsonl", "prompt_column": "prompt",
                                                     **({"system_prompt": system} if system else {})},
            "rewards": [{"name": "solved", "type": "environment"}] if environment else
            [{"name": "exact", "type": "exact_match", "answer_column": "a"}],
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1}}
    if environment:
        data["environment"] = {"file": "env.py", "class": demo_tools.ENV_CLASS}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(tmp_path / "spec.yaml")


def test_tool_schemas_and_system_prompt_count_in_the_prompt_length(tmp_path):
    from transformers.utils.chat_template_utils import get_json_schema

    namespace: dict = {}
    exec(demo_tools.ENV_SOURCE, namespace)  # noqa: S102 — the demo's own environment source
    schema_tokens = len(json.dumps([get_json_schema(namespace[demo_tools.ENV_CLASS]().add)])) // 4
    plain = _dataset_stats(_spec(tmp_path / "a", False, False))[0]
    tools = _dataset_stats(_spec(tmp_path / "b", False, True))[0]
    assert not plain.tokenized and not tools.tokenized
    assert schema_tokens > 30 and abs(tools.prompt_max - plain.prompt_max - schema_tokens) <= 2
    system = _dataset_stats(_spec(tmp_path / "c", True, True, system="You are a careful calculator. " * 8))[0]
    assert abs(system.prompt_max - tools.prompt_max - len("You are a careful calculator. " * 8) // 4) <= 2


def test_plain_text_prompts_with_an_environment_are_refused(tmp_path):
    spec = _spec(tmp_path, True, True)
    with pytest.raises(UserError, match="plain-text prompt with an environment"):
        _dataset_stats(spec)
    with pytest.raises(UserError, match="plain-text prompt with an environment"):
        training_prompt(spec, "What is 3 plus 4?")


def test_a_chat_template_trl_cannot_parse_is_refused_before_training(tmp_path):
    """TRL reads tool calls through a response template; a template it has none for stops its trainer at the
    start (on the training box), so the render refuses it."""
    from finetune.config.dataset import _environment_tools
    from finetune.tinymodel import build_tokenizer

    spec = _spec(tmp_path, False, True)
    tok = build_tokenizer(tools=True)
    assert len(_environment_tools(spec, tok)) == 1  # its own response_template: parsed
    tok.response_template = None
    tok.chat_template = tok.chat_template + "{# a fine-tuned variant's template #}"
    with pytest.raises(UserError, match="no response parser for the chat template"):
        _environment_tools(spec, tok)
