"""Published bug (Visual-RFT#176): correctness = "the gold appears somewhere in the completion".

An empty <answer></answer> with the gold in the reasoning, or "A or B or C", scores 1.0.
"""
import re


def _text(completion):
    return completion[0]["content"] if isinstance(completion, list) else completion


def format_ok(prompts, completions, **kwargs):
    return [1.0 if re.fullmatch(r"(?s).*<answer>[^<>]+</answer>\s*", _text(c)) else 0.0 for c in completions]


def correctness(prompts, completions, answer, **kwargs):
    return [1.0 if str(gold).strip() in _text(c) else 0.0 for c, gold in zip(completions, answer)]


def disable_caches():
    pass


REWARD_FUNCS = [format_ok, correctness]
REWARD_WEIGHTS = [0.2, 1.0]
REWARD_META = [
    {"name": "format_ok", "type": "format", "role": "format", "threshold": 1.0, "min": 0.0, "max": 1.0,
     "weight": 0.2, "gated": False, "episode": False},
    {"name": "correctness", "type": "exact_match", "role": "correctness", "threshold": 1.0, "min": 0.0, "max": 1.0,
     "weight": 1.0, "gated": False, "episode": False},
]
