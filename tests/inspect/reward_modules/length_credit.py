"""Published failure: a reward that grows with completion length ("more reasoning = better").

Here correctness gives partial credit for reasoning length on top of the answer check, so a long
wrong answer outscores a short right one (open-r1#587 / the Dr.GRPO length bias).
"""
import re


def _text(completion):
    return completion[0]["content"] if isinstance(completion, list) else completion


def format_ok(prompts, completions, **kwargs):
    return [1.0 if re.fullmatch(r"(?s).*<answer>[^<>]+</answer>\s*", _text(c)) else 0.0 for c in completions]


def correctness(prompts, completions, answer, **kwargs):
    out = []
    for c, gold in zip(completions, answer):
        text = _text(c)
        found = re.findall(r"<answer>(.*?)</answer>", text, re.S)
        right = bool(found) and found[-1].strip() == str(gold).strip()
        depth = min(1.0, len(text) / 300.0)  # "reward thorough reasoning"
        out.append(min(1.0, 0.5 * right + depth))
    return out


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
