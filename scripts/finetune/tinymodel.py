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


def build_tokenizer(extra_words: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(vocabulary(extra_words))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PRE_TOKENIZE_PATTERN), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>", unk_token="<|unk|>",
        bos_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(out_dir: str | Path, *, hidden: int = 64, layers: int = 2, heads: int = 4,
                     kv_heads: int = 2, intermediate: int = 128, seed: int = 0, moe: bool = False,
                     extra_words: Sequence[str] = ()) -> Path:
    """Save a randomly initialised tiny Qwen3 (or Qwen3-MoE) model + tokenizer to ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, PretrainedConfig, Qwen3Config

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(extra_words)
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
