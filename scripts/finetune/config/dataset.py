"""The dataset statistics a render checks its lengths against: token lengths of the prompts and answers
(measured with the model's tokenizer when it is local, else estimated), including the tool schemas an environment's
chat template renders, and the length checks against generation.max_* and the model's context."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from finetune.config.plan import DatasetStats, Setting
from finetune.dataset import data_format, load_rows
from finetune.errors import UserError

if TYPE_CHECKING:

    from finetune.models import ModelInfo
    from finetune.spec import RunSpec


# ----------------------------------------------------------------------------------------------
# dataset

def _percentile(values: list[int], q: float) -> int:
    s = sorted(values)
    return s[min(len(s) - 1, int(math.ceil(q * len(s))) - 1)] if s else 0


def _dataset_stats(spec: RunSpec) -> tuple[DatasetStats, str]:
    rows = load_rows(spec, training=True)  # the filtered file once `finetune data filter` set dataset.filter
    fmt = data_format(spec, spec.training_data_path())
    d = spec.dataset
    columns = sorted(rows[0])
    from finetune.rewards.columns import reward_columns

    for col, where in [(d.prompt_column, "dataset.prompt_column"), *reward_columns(spec)]:
        if col not in rows[0]:
            raise UserError(f"column '{col}' not in the dataset (columns: {columns})", where=where,
                            fix="name an existing column")
    tokenizer = None
    from finetune import hub

    model_path = hub.cached_model(spec.model, spec.source.parent if spec.source else None)  # local or HF cache
    if model_path is not None and any((model_path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_path))

    def n_tokens(text: str) -> int:
        # without a local tokenizer: ~4 characters per token for English/code (a rough, stated estimate)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if tokenizer else max(1, len(text) // 4)

    tools = _environment_tools(spec, tokenizer)
    if tools is not None and not d.system_prompt and any(isinstance(r.get(d.prompt_column), str) for r in rows):
        from finetune.inspect.rollout import PLAIN_PROMPT, PLAIN_PROMPT_FIX

        raise UserError(PLAIN_PROMPT, where="dataset.prompt_column", fix=PLAIN_PROMPT_FIX)

    def prompt_text(p: Any) -> str:
        if d.system_prompt:  # as train.py sends it: the system message first, a text prompt as the user's
            p = [{"role": "system", "content": d.system_prompt}] + ([{"role": "user", "content": p}]
                                                                    if isinstance(p, str) else list(p))
        if isinstance(p, list):  # conversational
            if tokenizer is not None and getattr(tokenizer, "chat_template", None):
                # with an environment the template also renders its tool schemas: part of every prompt
                return str(tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True,
                                                         tools=tools))
            text = "\n".join(str(m.get("content", "")) for m in p if isinstance(m, dict))
            return text + (_schemas_text(tools) if tools else "")  # estimated: the schemas the template adds
        return str(p)

    prompts = [prompt_text(r.get(d.prompt_column, "")) for r in rows]
    answer_col = d.answer_column if d.answer_column and d.answer_column in rows[0] else None
    answers = [str(r.get(answer_col, "")) for r in rows] if answer_col else []
    p_max, p95 = _length_stats(prompts, n_tokens)
    a_max, a95 = _length_stats(answers, n_tokens) if answers else (None, None)
    return DatasetStats(len(rows), tokenizer is not None, p_max, p95, a_max, a95, answer_col, columns), fmt


def _schemas_text(tools: list[Any]) -> str:
    """The tools' JSON schemas as TRL hands them to the chat template (for a length estimate without the
    model's tokenizer: the template renders them into every prompt)."""
    import json

    from transformers.utils.chat_template_utils import get_json_schema

    schemas = []
    for tool in tools:
        try:
            schemas.append(get_json_schema(tool))
        except Exception:  # noqa: BLE001 — an undocumented tool: its name and signature still take room
            schemas.append({"name": getattr(tool, "__name__", "tool")})
    return "\n" + json.dumps(schemas)


def _require_response_parser(spec: RunSpec, tokenizer: Any) -> None:
    """TRL reads the model's tool calls with the tokenizer's response template (or one it knows for the chat
    template: Qwen2.5/3/3.5, Llama 3.1/3.2, GLM-4-MoE, GPT-OSS, Gemma 4, ...); for any other template its
    trainer refuses to start — on the training box, after the gate. Refused here instead."""
    if getattr(tokenizer, "response_template", None) is not None or getattr(tokenizer, "response_schema", None):
        return
    import copy

    from trl.chat_template_utils import add_response_schema

    try:
        add_response_schema(copy.copy(tokenizer))
    except ValueError:
        raise UserError(f"TRL {_trl_version()} has no response parser for the chat template of {spec.model}: "
                        "it cannot read the model's tool calls, and its trainer refuses to start", where="environment",
                        fix="use a model TRL parses (Qwen2.5/3/3.5, Llama 3.1/3.2, GLM-4, GPT-OSS, Gemma 4) or set "
                        "the tokenizer's response_template (transformers' response parsing docs)") from None


def _trl_version() -> str:
    import trl

    return str(trl.__version__)


def _environment_tools(spec: RunSpec, tokenizer: Any) -> list[Any] | None:
    """The environment's tools (methods of one instance, as TRL lists them), so prompt lengths include the tool
    schemas the chat template renders; a model whose template cannot render a tool-calling conversation is
    refused (TRL would refuse it at the trainer's start)."""
    if spec.environment is None:
        return None
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        from trl.chat_template_utils import supports_tool_calling

        if not supports_tool_calling(tokenizer):
            raise UserError(f"the chat template of {spec.model} cannot render tool calls and tool results",
                            where="environment", fix="use a model whose chat template supports tools (Qwen, "
                            "Llama 3.1+, ...) or set its chat template")
        _require_response_parser(spec, tokenizer)
    return _sandboxed_tools(spec)


def _sandboxed_tools(spec: RunSpec) -> list[Any]:
    """One instance of the environment built in the sandbox's agent host (its file is agent-written: it never runs
    in this process) and its tools as stand-ins with the real names, docstrings, signatures and type hints, so the
    chat template renders exactly the schemas TRL will."""
    import inspect

    from finetune.rewards.render import environment_sources
    from finetune.sandbox import runner

    assert spec.environment is not None  # the caller checked
    path = spec.resolve_path(spec.environment.file)
    host = runner.agent_host(environment_sources(spec.environment, spec.source), folder=str(path.parent))
    try:
        cls = runner.environment_class(host, "rewards_env", spec.environment.class_)
        instance = cls()
        instance._agent_fresh()  # constructed in the sandbox, as TRL constructs it
    except runner.AgentCodeRefused as exc:
        raise UserError(str(exc), where="environment", fix=exc.fix) from None
    except runner.AgentCallError as exc:
        raise UserError(f"{path}: the environment does not load ({exc})", where="environment",
                        fix="make the class importable and constructible without arguments") from None
    return [getattr(instance, name) for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")]


LENGTH_SAMPLE = 2000  # rows tokenized for the percentiles (a random sample, fixed seed)
LONGEST_BY_CHARS = 200  # plus the longest rows by characters, so the maximum is not sampled away


def _length_stats(texts: list[str], n_tokens: Callable[[str], int]) -> tuple[int, int]:
    """(max, 95th percentile) token length; large datasets are measured on a sample plus their longest rows."""
    import random

    if len(texts) <= LENGTH_SAMPLE + LONGEST_BY_CHARS:
        lens = [n_tokens(t) for t in texts]
        return max(lens), _percentile(lens, 0.95)
    sample = random.Random(0).sample(range(len(texts)), LENGTH_SAMPLE)
    longest = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)[:LONGEST_BY_CHARS]
    sample_lens = [n_tokens(texts[i]) for i in sample]
    return max(sample_lens + [n_tokens(texts[i]) for i in longest]), _percentile(sample_lens, 0.95)


def _check_lengths(spec: RunSpec, stats: DatasetStats, info: ModelInfo,
                   overrides: dict[str, Setting]) -> tuple[int, list[str]]:
    g = spec.generation
    warnings: list[str] = []
    unit = "tokens" if stats.tokenized else "tokens (estimated at 4 characters per token: tokenizer not local)"

    def refuse_or_warn(error: UserError) -> None:
        # measured with the model's tokenizer: refuse; only estimated: say so and let it through
        if stats.tokenized:
            raise error
        warnings.append(f"{error.what} ({error.fix}; estimate only — render next to the local model to check)")

    if stats.prompt_max > g.max_prompt_length:
        refuse_or_warn(UserError(f"the longest prompt is {stats.prompt_max} {unit}, over max_prompt_length "
                                 f"{g.max_prompt_length}: vLLM would reject it", where="generation.max_prompt_length",
                                 fix=f"set it to at least {stats.prompt_max} or drop the longest prompts"))
    if stats.answer_p95 is not None:
        if g.max_completion_length < stats.answer_p95:
            refuse_or_warn(UserError(
                f"max_completion_length {g.max_completion_length} is below the 95th percentile of the dataset's "
                f"'{stats.answer_column}' answers ({stats.answer_p95} {unit}): most reasoning would be truncated "
                "and score zero (trl#5697: a 256-token cap truncated 97–99% of completions)",
                where="generation.max_completion_length", fix=f"set it to at least {stats.answer_max}"))
        elif stats.answer_max is not None and g.max_completion_length < stats.answer_max:
            warnings.append(f"the longest '{stats.answer_column}' answer is {stats.answer_max} {unit}, over "
                            f"max_completion_length {g.max_completion_length}: its completions will be truncated")
    if g.max_completion_length <= 256:
        warnings.append(f"max_completion_length {g.max_completion_length} ≤ 256: watch completions/clipped_ratio "
                        "in the first steps (trl#5697: a 256 cap truncated 97–99% of completions, all-zero reward)")
    need = g.max_prompt_length + g.max_completion_length
    vllm_len = overrides.get("vllm_max_model_length")
    if vllm_len is not None and vllm_len.value is not None and vllm_len.value < need:
        raise UserError(f"vllm_max_model_length {vllm_len.value} < max_prompt_length + max_completion_length ({need})",
                        where="overrides.vllm_max_model_length", fix=f"set it to at least {need} or remove it")
    max_pos = info.max_position_embeddings
    if max_pos and need > max_pos:
        raise UserError(f"prompt + completion ({need} tokens) exceeds the model's context ({max_pos})",
                        where="generation.max_completion_length",
                        fix=f"keep max_prompt_length + max_completion_length ≤ {max_pos}")
    return need if vllm_len is None or vllm_len.value is None else vllm_len.value, warnings
