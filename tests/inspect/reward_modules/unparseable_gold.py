"""Published bug (open-r1#86): when the gold answer cannot be parsed, the reward "skips" by returning 1.0.

This is open-r1's original accuracy_reward logic with math-verify: every completion for such a
prompt is rewarded as correct, whatever it says.
"""
import re

from math_verify import parse, verify


def _text(completion):
    return completion[0]["content"] if isinstance(completion, list) else completion


def format_ok(prompts, completions, **kwargs):
    return [1.0 if re.fullmatch(r"(?s).*<answer>[^<>]+</answer>\s*", _text(c)) else 0.0 for c in completions]


def correctness(prompts, completions, answer, **kwargs):
    rewards = []
    for c, gold in zip(completions, answer):
        gold_parsed = parse(str(gold))
        if len(gold_parsed) != 0:
            found = re.findall(r"<answer>(.*?)</answer>", _text(c), re.S)
            answer_parsed = parse(found[-1]) if found else []
            rewards.append(float(verify(gold_parsed, answer_parsed)) if answer_parsed else 0.0)
        else:
            rewards.append(1.0)  # "skip" an unparseable gold — scores every completion as correct
    return rewards


def disable_caches():
    pass


REWARD_FUNCS = [format_ok, correctness]
REWARD_WEIGHTS = [0.2, 1.0]
REWARD_META = [
    {"name": "format_ok", "type": "format", "role": "format", "threshold": 1.0, "min": 0.0, "max": 1.0,
     "weight": 0.2, "gated": False, "episode": False},
    {"name": "correctness", "type": "math", "role": "correctness", "threshold": 1.0, "min": 0.0, "max": 1.0,
     "weight": 1.0, "gated": False, "episode": False},
]
