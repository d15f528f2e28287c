"""A tiny causal LM built locally (no hub): a transformers config + a `tokenizers` tokenizer.

Used by the demo and by tests that need a real model. Character-level for digits and punctuation,
word-level for letters, with tags such as ``<answer>`` kept whole, so arithmetic tasks tokenize
cleanly and decode back to the exact text (spaces are tokens; the decoder fuses).
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|unk|>"]
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
WORDS = ["What", "is", "Compute", "Answer", "the", "answer", "The", "correct", "or", "and", "Think",
         "step", "by", "sum", "of", "plus", "minus", "times", "Copy", "digits", "boxed", "ignore",
         "rubric", "score", "print", "PASS", "def", "return", "exit", "import", "sys", "os"]
PRE_TOKENIZE_PATTERN = r"<\|[a-z]+\|>|</?[a-z]+>|[A-Za-z]+|\d|\s|."


def vocabulary(extra_words: Sequence[str] = ()) -> list[str]:
    chars = list(string.digits) + list(string.punctuation) + [" ", "\n"] + list(string.ascii_letters)
    vocab: list[str] = []
    for tok in SPECIAL + TAGS + chars + WORDS + list(extra_words):
        if tok not in vocab:
            vocab.append(tok)
    return vocab


# The tool-calling variant writes calls as Qwen / Hermes do (`<tool_call>{"name", "arguments"}</tool_call>`,
# results in `<tool_response>`), with a compact system block (each tool's signature, `add(a: integer, b: integer)`,
# not its whole JSON schema: a tiny model on CPU pays for every prompt token, and learns to copy arguments
# across 20 tokens in seconds where 170 take minutes) and TRL's own Qwen response template, saved with the tokenizer, so
# `GRPOTrainer(environment_factory=...)` parses its calls with transformers' `parse_response` as on Qwen.
TOOL_SPECIAL = ["<|pad|>", "<|im_end|>", "<|im_start|>", "<|unk|>"]
TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]
TOOL_WORDS = ["name", "arguments", "user", "assistant", "system", "tool", "type", "function", "object",
              "integer", "string", "number", "properties", "required", "description", "parameters"]
TOOL_PRE_TOKENIZE_PATTERN = r"<\|[a-z_]+\|>|</?[a-z_]+>|[A-Za-z]+|\d|\s|."


TOOL_CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n<tools>{% for tool in tools %}{% set f = tool.function or tool %}"
    "{{ f.name }}({% for arg, schema in f.parameters.properties.items() %}{{ arg }}: {{ schema.type }}"
    "{% if not loop.last %}, {% endif %}{% endfor %}){% endfor %}</tools><|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n"
    "{% if message.content %}{{ message.content }}\n{% endif %}"
    "{% for call in message.tool_calls %}{% set call = call.function if call.function is defined else call %}"
    "<tool_call>\n{\"name\": \"{{ call.name }}\", \"arguments\": {{ call.arguments | tojson }}}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% elif message.role == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}"
    "{{ '\\n' }}<tool_response>\n{{ message.content }}\n</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{% endif %}"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tool_chat_template() -> str:
    return TOOL_CHAT_TEMPLATE


def tool_response_template() -> dict[str, Any]:
    """TRL's response template for Qwen-style replies (`<think>`, `<tool_call>` blocks, `<|im_end|>`)."""
    from trl.chat_template_utils import qwen3_template

    return dict(qwen3_template)


def build_tokenizer(extra_words: Sequence[str] = (), *, tools: bool = False) -> PreTrainedTokenizerFast:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = TOOL_SPECIAL if tools else SPECIAL
    words = [*TOOL_TAGS, *TOOL_WORDS, *extra_words] if tools else list(extra_words)
    vocab = {t: i for i, t in enumerate(dict.fromkeys(special + vocabulary(words)[len(SPECIAL):]))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    pattern = TOOL_PRE_TOKENIZE_PATTERN if tools else PRE_TOKENIZE_PATTERN
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(special)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>" if tools else "<|end|>",
        unk_token="<|unk|>", bos_token=None,
    )
    fast.chat_template = tool_chat_template() if tools else CHAT_TEMPLATE
    if tools:
        fast.response_template = tool_response_template()  # saved in tokenizer_config.json
    return fast


def build_tiny_model(out_dir: str | Path, *, hidden: int = 64, layers: int = 2, heads: int = 4,
                     kv_heads: int = 2, intermediate: int = 128, seed: int = 0, moe: bool = False,
                     extra_words: Sequence[str] = (), tools: bool = False) -> Path:
    """Save a randomly initialised tiny Qwen3 (or Qwen3-MoE) model + tokenizer to ``out_dir``; ``tools``:
    with Qwen2.5's tool-calling chat template and its tags as tokens."""
    import torch
    from transformers import AutoModelForCausalLM, PretrainedConfig, Qwen3Config

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(extra_words, tools=tools)
    common: dict[str, Any] = dict(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=intermediate,
        max_position_embeddings=2048, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    if moe:
        from transformers import Qwen3MoeConfig

        # head_dim reaches PretrainedConfig through **kwargs (Qwen3MoeConfig's own signature omits it)
        head_dim: dict[str, Any] = {"head_dim": hidden // heads}
        config: PretrainedConfig = Qwen3MoeConfig(**common, **head_dim, num_experts=4,
                                                  num_experts_per_tok=2, moe_intermediate_size=intermediate,
                                                  decoder_sparse_step=1)
    else:
        config = Qwen3Config(**common, head_dim=hidden // heads)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # qwen2 checkpoints are forced onto Qwen2Tokenizer (BPE) by transformers 5; qwen3 honours the
    # declared class, so the WordLevel tokenizer above is what AutoTokenizer loads back.
    (out / "TINY_MODEL.json").write_text(json.dumps({"built_by": "finetune.tinymodel", "seed": seed,
                                                     "hidden": hidden, "layers": layers, "moe": moe}) + "\n")
    return out
