"""rewards_toolcall's tool-result escape (a pure function the environment wrapper, Phase 1's sampler and the
canonical rollout text share) and its reading of tool responses in a string completion."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.rewards.lib import rewards_toolcall as rt

TOKENS = ["<|end|>", "<|endoftext|>", "<|im_start|>", "</tool_response>", "[INST]", "ab"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*TOKENS, "<", "|", "\\", "e", "x", " ", "\n", "end|>", "<|"]), max_size=12)
       .map("".join))
def test_no_token_survives_and_nothing_else_changes(text):
    escaped = rt.escape_special_tokens(text, TOKENS)
    assert not any(t in escaped for t in [*TOKENS, *rt.COMMON_TURN_TOKENS])
    assert escaped.replace("\\", "") == text.replace("\\", "")  # the same text, broken by backslashes only
    assert rt.escape_special_tokens(escaped, TOKENS) == escaped


def test_the_longest_token_is_the_one_escaped_and_plain_text_is_untouched():
    assert rt.escape_special_tokens("x<|endoftext|>y<|end|>", TOKENS) == "x<\\|endoftext|>y<\\|end|>"
    assert rt.escape_special_tokens("a < b | c > d, 5 + 7 = 12\n", TOKENS) == "a < b | c > d, 5 + 7 = 12\n"
    assert rt.escape_special_tokens("</tool_response>") == "<\\/tool_response>"  # the common markers by default


def test_a_tokenizers_markers_are_its_special_and_added_tokens_not_its_words():
    from finetune.demo import tools as demo_tools
    from finetune.tinymodel import build_tokenizer

    tok = build_tokenizer(demo_tools.EXTRA_WORDS, tools=True)
    tok.add_tokens(["hello", "x", "<custom>"])  # an added word and a single character cannot be turn markers
    assert rt.special_token_strings(tok) == ["<custom>", "<|im_end|>", "<|im_start|>", "<|pad|>", "<|unk|>"]


def test_hundreds_of_tokens_and_a_long_result_are_escaped_at_once():
    tokens = [f"<|reserved_special_token_{i}|>" for i in range(256)] + TOKENS
    text = ("<|reserved_special_token_1" + "x" * 20) * 5_000 + "<|reserved_special_token_255|>"
    start = time.process_time()
    escaped = rt.escape_special_tokens(text, tokens)
    assert time.process_time() - start < 1.0 and escaped.endswith("<\\|reserved_special_token_255|>")


def test_tool_responses_are_not_the_models_text():
    assert rt.strip_tool_responses("a<tool_response>b</tool_response>c<tool_response>d") == "ac"
    assert rt.strip_tool_responses("a</tool_response>b") == "a</tool_response>b"
