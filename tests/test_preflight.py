"""Pre-flight checks (finetune.preflight, rendered as config/preflight.py): the loss mask TRL 1.16 builds on a real
rendered episode — real chat templates (TRL ships the models' own in trl/chat_templates), TRL's own tool-suffix and
training-template code — and the attention implementation of a loaded policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune import preflight

QUESTION = {"role": "user", "content": "What is 2 plus 3?"}
REPLY = {"role": "assistant", "content": "<answer>5</answer>"}
CALL = {"role": "assistant", "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}
RESULT = {"role": "tool", "name": "add", "content": "seven plus eight"}  # words added to the tiny vocabulary


def _template(name: str) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / name).read_text()


@pytest.fixture(scope="module")
def qwen_tokenizer():
    """The tiny Qwen-style tokenizer with Qwen2.5's real chat template (no {% generation %} markers) and
    Qwen2.5's base-model EOS token beside its end-of-turn token."""
    from finetune.tinymodel import build_tokenizer

    tok = build_tokenizer(["seven", "eight"], tools=True)
    tok.add_special_tokens({"additional_special_tokens": ["<|endoftext|>"]})
    tok.chat_template = _template("qwen2_5.jinja")
    return tok


def _ids(tok, *tokens: str) -> list[int]:
    return [tok.convert_tokens_to_ids(t) for t in tokens]


def test_a_template_whose_turn_end_is_no_eos_leaves_an_empty_mask(qwen_tokenizer):
    """Qwen2.5's chat template ends a turn with <|im_end|>; a base model's generation config stops only on
    <|endoftext|>: every completion runs to the cap, and mask_truncated_completions zeroes every one."""
    from trl.chat_template_utils import has_generation_markers

    assert not has_generation_markers(qwen_tokenizer.chat_template)
    base_eos = _ids(qwen_tokenizer, "<|endoftext|>")
    res = preflight.completion_mask_check(qwen_tokenizer, [QUESTION, REPLY], base_eos, True, "sample s1")
    assert not res.ok and res.trained == 0 and res.why.startswith("the loss mask is empty")
    assert "<|im_end|>" in res.why and "mask_truncated_completions zeroes them" in res.why
    unmasked = preflight.completion_mask_check(qwen_tokenizer, [QUESTION, REPLY], base_eos, False)
    assert not unmasked.ok and "trains on text past the end of its turn" in unmasked.why
    ok = preflight.completion_mask_check(qwen_tokenizer, [QUESTION, REPLY], _ids(qwen_tokenizer, "<|im_end|>"), True)
    assert ok.ok and ok.trained > 0 and ok.masked == 0, ok.why


def test_a_tool_episode_masks_the_tool_result(qwen_tokenizer):
    """TRL's _get_tool_suffix_ids on Qwen2.5's template: the result's tokens are 0, both assistant turns are 1."""
    episode = [QUESTION, CALL, RESULT, REPLY]
    res = preflight.completion_mask_check(qwen_tokenizer, episode, _ids(qwen_tokenizer, "<|im_end|>"), True)
    assert res.ok and res.masked > 0 and res.trained > 0, res.why
    ids, mask, _ = preflight.episode_mask(qwen_tokenizer, episode, _ids(qwen_tokenizer, "<|im_end|>"), True)
    masked_text = qwen_tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "seven plus eight" in masked_text and "<tool_response>" in masked_text


def test_a_tool_result_folded_into_the_reply_is_refused(qwen_tokenizer):
    """A (prefix-preserving) template that prints the tool result inside the next assistant turn: TRL's mask would
    train the model on the result as if it wrote it."""
    folding = ("{% for m in messages %}{% if m.role == 'assistant' %}<|im_start|>assistant\n"
               "{% if loop.index0 > 0 and messages[loop.index0 - 1].role == 'tool' %}"
               "{{ messages[loop.index0 - 1].content }} {% endif %}{{ m.content }}<|im_end|>\n"
               "{% elif m.role != 'tool' %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    import copy

    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = folding
    res = preflight.completion_mask_check(tok, [QUESTION, CALL, RESULT, REPLY], _ids(tok, "<|im_end|>"), True)
    assert not res.ok and "tool result would be trained on" in res.why and "seven plus eight" in res.why


def test_a_template_trl_cannot_make_training_safe_is_refused(qwen_tokenizer):
    """Qwen3's real template is not prefix-preserving (it drops earlier turns' thinking); TRL swaps in its training
    template for the known one, and refuses an unknown variant (here: the same template with one comment added)."""
    import copy

    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = _template("qwen3.jinja")
    known = preflight.completion_mask_check(tok, [QUESTION, CALL, RESULT, REPLY], _ids(tok, "<|im_end|>"), True)
    assert known.ok, known.why
    tok.chat_template = _template("qwen3.jinja") + "{#- a local edit #}"
    res = preflight.completion_mask_check(tok, [QUESTION, CALL, RESULT, REPLY], _ids(tok, "<|im_end|>"), True)
    assert not res.ok and res.why.startswith("TRL cannot build the loss mask") and "not training-compatible" in res.why


def test_the_episode_is_a_gated_sample_tool_trajectory_first(tmp_path):
    import json

    rows = [{"id": "a", "prompt": "What is 2 plus 3?", "completion": "5"},
            {"id": "b", "prompt": [QUESTION], "completion": "…", "trajectory": [CALL, RESULT, REPLY]}]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    messages, source = preflight.episode(tmp_path, "be brief")
    assert source == "samples.jsonl sample b" and messages == [QUESTION, CALL, RESULT, REPLY]
    (tmp_path / "samples.jsonl").write_text(json.dumps(rows[0]) + "\n")
    messages, _ = preflight.episode(tmp_path, "be brief")
    assert messages == [{"role": "system", "content": "be brief"}, QUESTION, {"role": "assistant", "content": "5"}]
    assert preflight.episode(tmp_path / "nowhere") is None


def test_eos_ids_as_trl_gathers_them(tiny_model_dir, tmp_path):
    import json
    import shutil

    assert preflight.eos_ids(str(tiny_model_dir)) == [1]  # <|end|>: generation config and tokenizer agree
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    gen = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps(gen | {"eos_token_id": [0, 5]}))
    assert preflight.eos_ids(str(copy)) == [1, 0, 5]  # the tokenizer's EOS is added in front, as TRL does


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_attention_implementation_is_known(tiny_model_dir, impl):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=impl)
    out = preflight.attention_check(model, batch=4, seq_len=1024, gradient_checkpointing=False)
    assert out["implementation"] == impl
    if impl == "eager":  # 4 × 4 heads × 1024² × 4 bytes (float32) per layer, 2 layers held
        assert out["per_layer_gib"] == pytest.approx(4 * 4 * 1024 * 1024 * 4 / 2**30)
        assert out["held_gib"] == pytest.approx(2 * out["per_layer_gib"]) and "does not count" in out["note"]
    else:
        assert "note" not in out
