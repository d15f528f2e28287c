"""Whole multi-turn rollouts for a spec ``environment``, generated the way TRL's ``environment_factory`` does.

One environment instance per rollout, ``reset(**row)`` with the dataset row (prompt included; a returned
string is appended to the last prompt message, as TRL does); the prompt rendered with the tools' JSON schemas
(transformers' ``get_json_schema`` of each public method, what TRL shows the model); each turn parsed with
TRL's ``parse_response`` (the tokenizer's response template); every call executed on the instance (a raising
or unknown tool gives ``{"error": ...}`` as its result, as TRL records a failed call; the chat template's
special tokens in a result escaped, as the rendered environment wrapper escapes them in training); the tool results
appended as the chat template's tool suffix, token ids concatenated as TRL concatenates them, and generation
resumed, for at most ``max_tool_calling_iterations`` rounds. The whole rollout (assistant turns, tool calls,
tool results) shares ``max_completion_length``: a round whose results would pass it is rolled back and the
rollout ends, as in TRL.

A rollout is returned as TRL's conversational completion (a list of assistant / tool messages), the very shape
``inspect sample --import`` takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from finetune.rewards.lib.rewards_toolcall import escape_special_tokens, special_token_strings

# TRL runs an environment's tools only on chat prompts: with a plain-text prompt its completions are strings,
# and its tool loop (`completion[0].get("tool_calls")`) fails at the first training step.
PLAIN_PROMPT = "a plain-text prompt with an environment: TRL renders tools and runs calls only for chat prompts"
PLAIN_PROMPT_FIX = ('store the prompts as chat messages ([{"role": "user", "content": ...}]) or set '
                    "dataset.system_prompt (train.py then sends chat messages)")


@dataclass
class Episode:
    """One rollout in progress: its token ids, its messages and the tools bound to its own instance."""

    prompt_ids: list[int]
    env: Any
    tools: dict[str, Callable[..., Any]]
    completion_ids: list[int] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    tool_failures: int = 0
    truncated: bool = False
    done: bool = False


def tool_schemas(tools: dict[str, Callable[..., Any]]) -> list[dict[str, Any]]:
    """The JSON schemas TRL renders into the prompt for these tools."""
    from transformers.utils.chat_template_utils import get_json_schema

    return [get_json_schema(fn) for fn in tools.values()]


def _suffix_ids(tok: Any, tool_messages: list[dict[str, Any]]) -> list[int]:
    """The chat template's tokens for tool results + the next generation prompt (TRL's _get_tool_suffix_ids)."""
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    prefix = list(tok.apply_chat_template(dummy, tokenize=True, return_dict=False))
    full = list(tok.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=False))
    ends = [i for i, t in enumerate(prefix) if t == tok.eos_token_id]
    prefix = prefix[:ends[-1] + 1] if ends else prefix
    return full[len(prefix):]


def _execute(ep: Episode, calls: list[dict[str, Any]], tokens: list[str]) -> list[dict[str, Any]]:
    """Run the turn's calls on the episode's instance; each result (or error) is tool-turn text with the
    template's special tokens escaped, as the rendered environment wrapper gives it to TRL in training (a result
    cannot close its turn and forge another: rewards_toolcall.escape_special_tokens)."""
    results = []
    for call in calls:
        ep.tool_calls += 1
        function = call.get("function", {}) if call.get("type") == "function" else {}
        name = function.get("name") or call.get("name", "unknown")
        try:
            if name not in ep.tools:
                raise ValueError(f"Tool {name} not found.")
            result: Any = ep.tools[name](**(function.get("arguments") or {}))
        except Exception as exc:  # the model's call failed: recorded as its result, as TRL does
            ep.tool_failures += 1
            result = {"error": str(exc)}
        results.append({"role": "tool", "name": name, "content": escape_special_tokens(str(result), tokens)})
    return results


class RolloutSampler:
    """Generates whole rollouts with a causal LM and an environment factory (the rendered rewards.py's)."""

    def __init__(self, model: Any, tok: Any, factory: Callable[[], Any],
                 tools_of: Callable[[Any], dict[str, Callable[..., Any]]], max_iterations: int,
                 max_completion_length: int) -> None:
        self.model, self.tok, self.factory, self.tools_of = model, tok, factory, tools_of
        self.max_iterations, self.budget = max_iterations, max_completion_length
        self.tokens = special_token_strings(tok)

    def _start(self, prompt: list[dict[str, Any]], row: dict[str, Any]) -> Episode:
        env = self.factory()
        observation = env.reset(**{**row, "prompt": prompt})
        if isinstance(observation, str):
            prompt = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + observation}]
        tools = self.tools_of(env)
        ids = self.tok.apply_chat_template(prompt, tools=tool_schemas(tools), add_generation_prompt=True,
                                           tokenize=True, return_dict=False)
        return Episode(prompt_ids=list(ids), env=env, tools=tools)

    def _generate(self, episodes: list[Episode], generation: dict[str, Any]) -> list[list[int]]:
        """One turn for each episode: new ids up to and including EOS, within the episode's remaining budget."""
        import torch

        seqs = [ep.prompt_ids + ep.completion_ids for ep in episodes]
        width, pad = max(len(s) for s in seqs), self.tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=self.model.device)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=self.model.device)
        room = max(self.budget - len(ep.completion_ids) for ep in episodes)
        with torch.no_grad():
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, do_sample=True, max_new_tokens=room,
                                      pad_token_id=pad, eos_token_id=self.tok.eos_token_id, **generation)
        turns = []
        for ep, ids in zip(episodes, out[:, width:].tolist()):
            ids = ids[:self.budget - len(ep.completion_ids)]
            end = next((n for n, t in enumerate(ids) if t == self.tok.eos_token_id), None)
            ep.truncated = end is None
            turns.append(ids if end is None else ids[:end + 1])
        return turns

    def _parse(self, parse_response: Callable[..., Any], ep: Episode, new: list[int]) -> dict[str, Any]:
        """TRL's parse of one turn; an empty turn (or a parse that is not one message) is its plain text."""
        parsed = parse_response(self.tok, new, prefix=ep.prompt_ids + ep.completion_ids,
                                tools=tool_schemas(ep.tools)) if new else None
        if isinstance(parsed, dict):
            return parsed
        return {"role": "assistant", "content": self.tok.decode(new, skip_special_tokens=True)}

    def run(self, prompts: list[list[dict[str, Any]]], rows: list[dict[str, Any]], k: int,
            generation: dict[str, Any]) -> list[list[Episode]]:
        """``k`` rollouts per prompt (``generation``: temperature, top_p, ... as generate() takes them)."""
        from trl.chat_template_utils import parse_response

        groups = [[self._start(p, r) for _ in range(k)] for p, r in zip(prompts, rows)]
        active = [ep for group in groups for ep in group]
        for iteration in range(self.max_iterations + 1):
            if not active:
                break
            for ep, new in zip(active, self._generate(active, generation)):
                message = self._parse(parse_response, ep, new)
                ep.completion_ids += new
                ep.messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls or ep.truncated or iteration == self.max_iterations:
                    ep.done = True
                    continue
                results = _execute(ep, calls, self.tokens)
                suffix = _suffix_ids(self.tok, results)
                if len(ep.completion_ids) + len(suffix) > self.budget:  # the results would pass the budget
                    ep.done = ep.truncated = True
                    continue
                ep.messages += results
                ep.completion_ids += suffix
            active = [ep for ep in active if not ep.done]
        return groups


def trajectory_row(ep: Episode) -> Any:
    """The completion as ``inspect sample --import`` takes it: TRL's message list for a rollout with tool
    calls or results, the text of a lone assistant turn otherwise."""
    if len(ep.messages) == 1 and not ep.messages[0].get("tool_calls"):
        return ep.messages[0].get("content") or ""
    return [{k: v for k, v in m.items() if k in ("role", "content", "name", "tool_calls")} for m in ep.messages]
