"""Pre-flight checks of a rendered GRPO run that need the model's own files, at the start of train.py.

One module, two homes: `finetune config render` copies it VERBATIM beside train.py as ``config/preflight.py``
(train.py loads it by path and checks its sha256), and the plugin imports it as ``finetune.preflight``. Standard
library at import; transformers / TRL are imported by the functions that need them.

* :func:`completion_mask_check` — on a real rendered episode (a gated sample: its prompt, its reply or its whole
  tool-calling trajectory), the loss mask TRL 1.16 builds: the ids the model generates for each assistant turn up
  to the first EOS id generation stops on (``GRPOTrainer.__init__``: ``generation_config.eos_token_id`` plus the
  tokenizer's; ``_generate_single_turn``'s completion mask), and 0 for each tool result (``_tool_call_loop``'s
  ``tool_mask``, the suffix ``_get_tool_suffix_ids`` computes, with TRL's training chat template when the model's is
  not prefix-preserving). It fails when nothing would be trained (every completion truncated because the template
  ends its turns with a token that is not an EOS id, and mask_truncated_completions zeroes them), when a tool result
  would be trained on, or when TRL cannot build the mask for the template at all.
* :func:`attention_check` — the attention implementation the loaded policy runs; ``eager`` keeps a batch × heads ×
  T² softmax per layer for the backward pass, which the memory estimate does not count.
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class MaskCheck:
    """The loss mask of one rendered episode: ``trained`` tokens (mask 1), ``masked`` (tool results, mask 0)."""

    ok: bool
    why: str
    trained: int = 0
    masked: int = 0
    source: str = ""
    notes: list[str] = field(default_factory=list)


def eos_ids(model_path: str) -> list[int]:
    """The ids generation stops on, as GRPOTrainer.__init__ (TRL 1.16) gathers them: the model's
    generation_config.eos_token_id (from generation_config.json, else the model config) and the tokenizer's."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    try:
        gen = GenerationConfig.from_pretrained(model_path)
    except OSError:
        gen = GenerationConfig.from_model_config(AutoConfig.from_pretrained(model_path))
    ids = gen.eos_token_id
    out = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    tok_eos = AutoTokenizer.from_pretrained(model_path).eos_token_id
    return out if tok_eos is None or tok_eos in out else [tok_eos, *out]


def episode(run_dir: Path, system_prompt: str | None = None) -> tuple[list[dict[str, Any]], str] | None:
    """(messages, where from) of the first gated sample — a tool-calling trajectory when one exists — as TRL
    would render it (the system prompt train.py adds in front); None without a conversational sample."""
    path = run_dir / "samples.jsonl"
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("prompt"), (str, list))]
    rows.sort(key=lambda r: not r.get("trajectory"))  # a tool episode first: its mask has tool results to exclude
    for row in rows:
        prompt = row["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if system_prompt and isinstance(prompt, str):
            messages.insert(0, {"role": "system", "content": system_prompt})
        reply = row.get("trajectory") or [{"role": "assistant", "content": str(row.get("completion", ""))}]
        return messages + list(reply), f"{path.name} sample {row.get('id', '?')}"
    return None


def _render(tokenizer: Any, messages: list[dict[str, Any]], template: str | None, generation: bool,
            tools: list[Any] | None = None) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation,
                                        chat_template=template, tools=tools, return_dict=False)
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def _training_template(tokenizer: Any, tool_episode: bool) -> str | None:
    """The template TRL renders with (GRPOTrainer.__init__): the model's own, or for tool-calling runs whose template
    is not prefix-preserving TRL's training template (get_training_chat_template raises for an unknown one)."""
    if not tool_episode:
        return None
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def _tool_suffix(tokenizer: Any, template: str | None, tool_messages: list[dict[str, Any]]) -> list[int]:
    """TRL 1.16's own GRPOTrainer._get_tool_suffix_ids on this tokenizer and template: the ids of the tool results."""
    from trl import GRPOTrainer

    trainer_view = types.SimpleNamespace(processing_class=tokenizer, chat_template=template, chat_template_kwargs={},
                                         _is_vlm=False, _tokenizer=tokenizer)
    suffix: Any = GRPOTrainer._get_tool_suffix_ids
    return list(suffix(trainer_view, tool_messages))


def episode_mask(tokenizer: Any, messages: list[dict[str, Any]], stop_ids: list[int], mask_truncated: bool
                 ) -> tuple[list[int], list[int], list[str]]:
    """(completion ids, TRL's loss mask of them, notes) for ``messages`` = prompt turns + the reply / trajectory."""
    first = next(i for i, m in enumerate(messages) if m.get("role") in ("assistant", "tool"))
    tool_episode = any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
    template = _training_template(tokenizer, tool_episode)
    ids: list[int] = []
    mask: list[int] = []
    notes: list[str] = []
    ended = True
    i = first
    while i < len(messages):
        if messages[i].get("role") == "tool":
            j = i
            while j < len(messages) and messages[j].get("role") == "tool":
                j += 1
            suffix = _tool_suffix(tokenizer, template, messages[i:j])
            ids, mask, i = ids + suffix, mask + [0] * len(suffix), j
            continue
        before = _render(tokenizer, messages[:i], template, True)
        after = _render(tokenizer, messages[:i + 1], template, False)
        if after[:len(before)] != before:
            raise ValueError("the chat template renders the prompt differently once a reply follows it")
        turn = after[len(before):]
        stop = next((k for k, t in enumerate(turn) if t in stop_ids), None)
        ended = stop is not None
        turn = turn if stop is None else turn[:stop + 1]  # generation stops at the first EOS id
        ids, mask, i = ids + turn, mask + [1] * len(turn), i + 1
    if not ended:
        end = tokenizer.convert_ids_to_tokens(after[-2:]) if after else []
        notes.append(f"the template ends the reply with {end} and none is an EOS id generation stops on "
                     f"({stop_ids}): every completion runs to max_completion_length")
        if mask_truncated:
            mask = [0] * len(mask)  # mask_truncated_completions zeroes a completion that never reached an EOS
    return ids, mask, notes


def completion_mask_check(tokenizer: Any, messages: list[dict[str, Any]], stop_ids: list[int],
                          mask_truncated: bool, source: str = "") -> MaskCheck:
    """Refuse a run whose loss mask on this episode is empty or covers a tool result; see the module docstring."""
    try:
        ids, mask, notes = episode_mask(tokenizer, messages, stop_ids, mask_truncated)
    except (ValueError, TypeError) as exc:  # TRL's own refusals (get_training_chat_template, prefix check)
        return MaskCheck(False, f"TRL cannot build the loss mask with this chat template: {exc}", source=source)
    trained, masked = sum(mask), len(mask) - sum(mask)
    if not trained:
        return MaskCheck(False, "the loss mask is empty: " + ("; ".join(notes) or "no reply tokens") +
                         (" and mask_truncated_completions zeroes them" if mask_truncated and notes else ""),
                         trained, masked, source, notes)
    kept = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    leaked = [m["content"] for m in messages if m.get("role") == "tool" and isinstance(m.get("content"), str)
              and len(m["content"].strip()) >= 4 and m["content"].strip() in kept]
    if leaked:
        return MaskCheck(False, f"a tool result would be trained on as if the model wrote it: {leaked[0][:60]!r}",
                         trained, masked, source, notes)
    if notes:
        return MaskCheck(False, "; ".join(notes) + ": the model trains on text past the end of its turn",
                         trained, masked, source, notes)
    return MaskCheck(True, f"{trained} reply token(s) trained, {masked} tool-result token(s) masked", trained,
                     masked, source, notes)


def attention_check(model: Any, batch: int, seq_len: int, gradient_checkpointing: bool) -> dict[str, Any]:
    """The attention implementation the loaded policy runs and, for ``eager``, the softmax it keeps per layer."""
    config = getattr(model, "config", None)
    impl = str(getattr(config, "_attn_implementation", None) or "unknown")
    out: dict[str, Any] = {"implementation": impl}
    if impl == "eager" and config is not None:
        text = getattr(config, "text_config", None) or config
        heads, layers = int(text.num_attention_heads), int(text.num_hidden_layers)
        dtype = getattr(text, "dtype", None) or getattr(text, "torch_dtype", None)
        width = 4 if str(dtype).endswith("float32") else 2
        per_layer = batch * heads * seq_len * seq_len * width
        held = per_layer * (1 if gradient_checkpointing else layers)
        out.update(per_layer_gib=per_layer / 2**30, held_gib=held / 2**30,
                   note=f"eager attention keeps a {batch} × {heads} heads × {seq_len}² softmax per layer "
                        f"({per_layer / 2**30:.2f} GiB; {held / 2**30:.2f} GiB held for the backward pass"
                        f"{' with gradient checkpointing' if gradient_checkpointing else f' over {layers} layers'}),"
                        " which the memory estimate does not count")
    return out
