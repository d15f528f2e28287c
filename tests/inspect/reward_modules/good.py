"""A correct composite reward in the rendered-rewards.py shape: format + exact match on <answer>."""
import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def _text(completion):
    return completion[0]["content"] if isinstance(completion, list) else completion


def _extract(text):
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def _norm(value):
    value = " ".join(str(value).split())
    try:
        return repr(float(value))
    except ValueError:
        return value


_RETRACTION = re.compile(r"\b(?:wait|actually|mistake)\b", re.I)


def _hedged(text):
    """Several different answers, 'or' inside the answer, or a retraction after it: no single answer."""
    found = {_norm(f.strip()) for f in _ANSWER.findall(text)}
    after = text[text.rfind("</answer>"):] if found else ""
    return len(found) != 1 or bool(_RETRACTION.search(after) or re.search(r"\bor\b", " ".join(found)))


def format_ok(prompts, completions, **kwargs):
    # one non-empty answer block; a closing remark after it is how instruct models write
    return [1.0 if re.fullmatch(r"(?s)(?:(?!<answer>).)*<answer>[^<>]*\S[^<>]*</answer>(?:(?!<answer>).)*", _text(c))
            else 0.0 for c in completions]


def correctness(prompts, completions, answer, **kwargs):
    out = []
    for c, gold in zip(completions, answer):
        got = None if _hedged(_text(c)) else _extract(_text(c))
        out.append(1.0 if got is not None and _norm(got) == _norm(gold) else 0.0)
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
