"""Final-answer extraction the way a careful reader reads — copied verbatim beside rewards.py.

The one reader of boxed (``\\boxed{}`` / ``\\fbox{}``), tagged (``<answer>``), ``####`` / "the answer is" and
final-line answers, and of a JSON answer's payload: the rewards, the format check, Phase 1's probes and its
red flags all call it (:func:`final_answer` is the flags' question, "is there an answer at all").

Standalone (stdlib only): the renderer copies this file into the run directory as
``rewards_answers.py`` and the inspection gate binds its sha256 like rewards.py itself.

The rules (each one has a reason id; ``REASONS`` says what it means, the reward reference documents it):

* The final answer is the LAST answer container (``\\boxed{}``, ``<answer>``, a ``####`` line, a
  "the answer is ..." sentence). Prose, punctuation, markdown emphasis, math delimiters and closing
  remarks after it are allowed unless the spec says ``trailing_text: forbid``.
* Several containers with different values are a hedge; the same value twice is fine.
* A container naming more than one candidate (``or``, ``\\text{ or }``, "either", a parenthetical
  alternative, word/word alternatives) is a hedge.
* A retraction after the final container ("... no wait, it is 6") voids it, and so do the completion's
  own words rejecting the boxed value ("so it is not 12", "12 is incorrect", "the answer is not \\boxed{12}").
* A unit on both the answer and the gold must measure the same quantity; an answer in another unit of
  that quantity is converted exactly (``2 km`` = ``2000 m``; ``5 m`` is not ``5 cm``).
* Number forms are normalised: thin-space / ``{,}`` / space / comma thousands, ``3600.0``,
  ``3.6e3``, Unicode digits; TeX shorthand ``\\frac13``, ``\\sqrt3``, ``\\tfrac12`` is expanded.
"""

from __future__ import annotations

import decimal
import json
import re
import sys
import unicodedata
from collections.abc import Callable
from fractions import Fraction

# This module's code as this process compiled it: what rewards_mathpool's workers run (never a re-read file).
OWN_CODE = sys._getframe(0).f_code

# reason id -> what it means (the gate groups disagreements by these ids)
REASONS = {
    "ok": "a single final answer was found",
    "no_container": "no answer container (box, <answer>, ####, 'the answer is') in the completion",
    "empty_container": "the final answer container is empty",
    "unbalanced": "the answer container or the <think> block is not closed (truncated or unbalanced output)",
    "trailing_text": "text follows the final answer container and the spec forbids trailing text",
    "several_values": "several answer containers with different values (a hedge)",
    "hedge_or": "the final answer names alternatives ('or', 'either', '/' or a parenthetical alternative)",
    "retraction": "the completion retracts its final answer after the container ('no wait, ...')",
    "rejected": "the completion's own words reject its final answer ('so it is not 12', 'the answer is not "
                "\\boxed{12}')",
    "unit_mismatch": "the answer's unit measures another quantity than the gold's unit",
}

# ([(content, end offset)], closed): the containers found in a text, and whether the last one closes
Containers = tuple[list[tuple[str, int]], bool]

_BOXED = ("\\boxed{", "\\fbox{")
_HASH = re.compile(r"^[ \t>*_]*####[ \t]*(.*)$", re.M)
_ANSWER_IS = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=)\s*:?\s*", re.I)
_HEDGE_WORDS = re.compile(r"(?:\\text\{[^{}]*\b(?:or|either|maybe|possibly)\b[^{}]*\}|(?<![\\A-Za-z])"
                          r"(?:or|either|maybe|possibly|perhaps|otherwise)(?![A-Za-z]))", re.I)
_WORD_SLASH = re.compile(r"(?<![\\\w])[A-Za-z]{1,20}\s*/\s*[A-Za-z]{1,20}(?!\w)")
_RETRACTION = re.compile(
    r"\b(?:no,?\s+wait|wait|actually|correction|oops|scratch that|i made an? (?:mistake|error)|"
    r"that(?:'s| is| was) (?:wrong|incorrect|not right)|is (?:wrong|incorrect)|should (?:be|have been)|"
    r"instead|rather|re-?calculat\w*|mistake)\b", re.I)
_STRONG_RETRACTION = re.compile(r"\b(?:scratch that|correction|mistake|error|wrong|incorrect|not right)\b", re.I)
_RECHECK = re.compile(r"\b(?:double-?check|verify|verified|check|confirm\w*|holds|stays)\b", re.I)
_NUMBER_TOKEN = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_SPACES = re.compile(r"\s+")

# ------------------------------------------------------------------------------------ containers --


def _balanced(text: str, open_at: int) -> int:
    """Index just after the brace group whose '{' is at ``open_at - 1``; -1 when it never closes."""
    depth, i = 1, open_at
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def boxed(text: str) -> Containers:
    """([(content, end)], closed): every \\boxed{...} / \\fbox{...} in order; closed is False when the
    last one never closes (a truncated completion)."""
    found: list[tuple[str, int]] = []
    pos = 0
    # each marker's next position, searched again only once the reading has passed it (searching both from
    # every box would be quadratic in a completion of thousands of boxes)
    nexts = {m: text.find(m) for m in _BOXED}
    while True:
        for m in _BOXED:
            if 0 <= nexts[m] < pos:
                nexts[m] = text.find(m, pos)
        starts = [(s, m) for m, s in nexts.items() if s >= 0]
        if not starts:
            return found, True
        start, marker = min(starts)
        end = _balanced(text, start + len(marker))
        if end < 0:
            return found, False
        found.append((text[start + len(marker):end - 1], end))
        pos = end


def tag_blocks(text: str, tag: str = "answer") -> Containers:
    """([(content, end)], closed) for every <tag>...</tag>; closed is False for an unclosed or nested tag."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    found: list[tuple[str, int]] = []
    pos = 0
    while True:
        start = text.find(opening, pos)
        if start < 0:
            break
        end = text.find(closing, start + len(opening))
        if end < 0:
            return found, False
        content = text[start + len(opening):end]
        if opening in content:
            return found, False
        found.append((content, end + len(closing)))
        pos = end + len(closing)
    return found, text.count(closing) == len(found)


def hash_lines(text: str) -> list[tuple[str, int]]:
    return [(m.group(1).rstrip(" \t"), m.end()) for m in _HASH.finditer(text)]


def answer_is(text: str) -> list[tuple[str, int]]:
    """The last 'the answer is X' sentence (GPT-style closing line), as [(X, end)]."""
    out: list[tuple[str, int]] = []
    for line_match in re.finditer(r"[^\n]+", text):
        line = line_match.group(0)
        cue = None
        for cue in _ANSWER_IS.finditer(line):  # noqa: B007 - keeps the last cue on the line
            pass
        if cue is not None:
            rest = line[cue.end():]
            value = re.split(r"(?<=[^\d\\])[.!;](?:\s|$)|\.\s|\.$", rest + " ", maxsplit=1)[0].strip()
            if value:
                out.append((value, line_match.start() + cue.end() + len(rest)))
    return out[-1:]


def after_thinking(text: str) -> str | None:
    """The text after the last </think> (containers inside the reasoning are not answers); None when a
    <think> block is never closed (the completion stopped inside its reasoning: no final answer)."""
    if "</think>" in text:
        return text[text.rfind("</think>") + len("</think>"):]
    if "<think>" in text:
        return None
    return text


def containers(text: str, how: str) -> Containers:
    """([(content, end)], closed) for extraction ``how`` (boxed, answer_tag, hash_answer, answer_is, any)."""
    if how == "boxed":
        return boxed(text)
    if how == "answer_tag":
        return tag_blocks(text, "answer")
    if how == "hash_answer":
        return hash_lines(text), True
    if how == "answer_is":
        return answer_is(text), True
    if how == "any":
        for kind in ("boxed", "answer_tag", "hash_answer", "answer_is"):
            found, closed = containers(text, kind)
            if found or not closed:
                return found, closed
        return [], True
    raise ValueError(f"unknown extraction {how!r}")


# ------------------------------------------------------------------------------------ values --

_OPEN_DELIMS, _CLOSE_DELIMS = ("$$", "$", "\\(", "\\["), ("$$", "$", "\\)", "\\]")
_EMPHASIS = re.compile(r"^(\*\*|__|\*|`)(.+)\1$", re.S)
_TEXT_WRAP = re.compile(r"^\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}$")
_THOUSANDS = re.compile(r"(?<=\d)(?:,\\!\s*|\{,\}\\!\s*|\\,|\\!|\\;|\\ |\{,\}|~|[\u2009\u202f\u00a0\u2006 ]|,)"
                        r"(?=\d{3}(?!\d))")
# inside LaTeX a plain comma may separate values ("(12,102)"): only the unambiguous separators join
_LATEX_THOUSANDS = re.compile(r"(?<=\d)(?:,\\!\s*|\{,\}\\!\s*|\\,|\\!|\{,\}|[\u2009\u202f])(?=\d{3}(?!\d))")
_SHORT_FRAC = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_SHORT_FRAC1 = re.compile(r"\\[dt]?frac\s*(\d)\s*(\{)")
_SHORT_SQRT = re.compile(r"\\sqrt\s*(\d)")
_SCI = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|\s*(?:\\times|\\cdot|×)\s*10\^\{?([+-]?\d+)\}?)?$")
_UNIT_TAIL = re.compile(r"(?:\s*(?:\\(?:text|textnormal|textrm|mathrm|mbox)\{\s*[A-Za-z][A-Za-z .\-/]*\}"
                        r"|\\?%|\^\\circ|\^\{\\circ\}|°))+$")
_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")


def ascii_digits(value: str) -> str:
    """Unicode decimal digits (full-width, Arabic-Indic, Devanagari, ...) as ASCII digits."""
    if value.isascii():
        return value
    out = []
    for ch in value:
        digit = unicodedata.decimal(ch, None) if not ch.isascii() else None
        if digit is not None:
            out.append(str(digit))
        elif ch in "\uff0e\uff0c\uff0d\u2212":  # full-width . , - and the minus sign
            out.append({"\uff0e": ".", "\uff0c": ",", "\uff0d": "-", "\u2212": "-"}[ch])
        else:
            out.append(ch)
    return "".join(out)


_DECIMAL_GROUPS = re.compile(r"(?<=\.)\d{3}(?:(?:\\,|[\u2009\u202f])\d{1,3})+(?!\d)")


def join_decimal_groups(value: str) -> str:
    return _DECIMAL_GROUPS.sub(lambda m: re.sub(r"\\,|[\u2009\u202f]", "", m.group(0)), value)


def canonical_number(value: str) -> str | None:
    """'3,600', '3\\,600', '3 600', '3600.0', '3.6e3', '3.6 \\times 10^3' -> '3600'; None if not one number.
    Digits after the point grouped in threes by thin spaces (SI style, '6.283\\,185\\,3') are joined too."""
    value = _THOUSANDS.sub("", join_decimal_groups(ascii_digits(value.strip()).rstrip(".")))
    if len(value) > 80:
        return None
    match = _SCI.match(value)
    if not match:
        return None
    # The default context keeps 28 digits: a 29-digit integer gold would fail to quantize. Values are at
    # most 80 characters with |exponent| <= 40, so 128 digits hold every number accepted here exactly.
    with decimal.localcontext() as context:
        context.prec = 128
        try:
            number = decimal.Decimal(match.group(1))
            exponent = match.group(2) or match.group(3)
            if exponent:
                number = number.scaleb(int(exponent))
        except (decimal.InvalidOperation, ValueError):
            return None
        if not number.is_finite() or abs(number.adjusted()) > 40:
            return None
        if number == number.to_integral_value():
            return str(number.quantize(decimal.Decimal(1)) + 0)  # "+ 0" turns -0 into 0
        return f"{number.normalize():f}"


_HIDDEN_MARKUP = re.compile(r"<!--.*?(?:-->|$)|~~.*?~~", re.S)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def shown(text: str) -> str:
    """The text as a reader sees it: HTML comments and struck-through text removed, tags dropped.

    math-verify searches its whole input for a parseable expression, so a gold hidden in
    `<!-- 54 -->` or `~~54~~` beside a wrong shown answer would otherwise verify as correct.
    """
    return _HTML_TAG.sub(" ", _HIDDEN_MARKUP.sub(" ", text)).strip()


def _strip_delims(value: str) -> str:
    """The value without one opening math delimiter (``$$``, ``$``, ``\\(``, ``\\[``) and one closing one."""
    for delim in _OPEN_DELIMS:
        if value.startswith(delim):
            value = value[len(delim):].lstrip()
            break
    for delim in _CLOSE_DELIMS:
        if value.endswith(delim):
            value = value[:-len(delim)].rstrip()
            break
    return value


def unwrap(value: str, keep_text: bool = False) -> str:
    """The answer without math delimiters, markdown emphasis, a whole-value \\text{} or final punctuation."""
    value = shown(value)
    for _ in range(4):
        before = value
        value = _strip_delims(value).strip()
        match = _EMPHASIS.match(value)
        if match:
            value = match.group(2).strip()
        match = None if keep_text else _TEXT_WRAP.match(value)
        if match:
            value = match.group(1).strip()
        value = value.rstrip(".,;:!。").strip()
        if value == before:
            break
    return value


def normalise_latex(value: str) -> str:
    """Digits, thousands separators and TeX shorthand normalised (the value is still LaTeX)."""
    value = join_decimal_groups(ascii_digits(value))
    value = _LATEX_THOUSANDS.sub("", value)
    value = _SHORT_FRAC.sub(r"\\frac{\1}{\2}", value)
    value = _SHORT_FRAC1.sub(r"\\frac{\1}\2", value)
    value = _SHORT_SQRT.sub(r"\\sqrt{\1}", value)
    value = value.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    number = canonical_number(unwrap(value))
    return number if number is not None else value


def is_hedge(value: str) -> bool:
    """True when one container names several candidates ('12 \\text{ or } 13', '13 (or 14)', 'A/B')."""
    plain = value.replace("\\text{", " ").replace("\\mathrm{", " ")
    return bool(_HEDGE_WORDS.search(value) or _HEDGE_WORDS.search(plain) or _WORD_SLASH.search(plain))


_WORD_UNITS = re.compile(r"^([-+$\\]*[\d.,\s{}\\!]*\d[\d.]*)\s+[A-Za-z][A-Za-z.\-/]*(?:\s+[A-Za-z][A-Za-z.\-/]*)?$")


# A number with a unit is short; the unit patterns backtrack over whitespace and digit runs, so a longer value
# is read as written (linear time whatever a completion holds).
UNIT_VALUE_MAX = 200


def strip_units(value: str) -> str:
    """The value without a trailing unit ('7.5 \\text{ hours}', '42 pages' -> the number): units are
    not a hedge. A value over UNIT_VALUE_MAX characters is returned as it is."""
    if len(value) > UNIT_VALUE_MAX:
        return value
    stripped = _UNIT_TAIL.sub("", value).strip()
    match = _WORD_UNITS.match(stripped)
    if match and not _HEDGE_WORDS.search(stripped):
        stripped = match.group(1).strip()
    return stripped or value


# ------------------------------------------------------------------------------------ units --

# unit -> (quantity, size in the quantity's base unit), every size exact (the inch is 2.54 cm by definition,
# the pound 0.45359237 kg). A unit outside this table is never converted: the answer is read as before.
_UNIT_SIZES: dict[str, tuple[str, Fraction]] = {}
_UNIT_TABLE: dict[str, dict[tuple[str, ...], Fraction]] = {
    "length": {("mm", "millimeter", "millimetre"): Fraction(1, 1000), ("cm", "centimeter", "centimetre"):
               Fraction(1, 100), ("m", "meter", "metre"): Fraction(1), ("km", "kilometer", "kilometre"): Fraction(1000),
               ("in", "inch", "inche"): Fraction(254, 10000), ("ft", "foot", "feet"): Fraction(3048, 10000),
               ("yd", "yard"): Fraction(9144, 10000), ("mi", "mile"): Fraction(1609344, 1000)},
    "mass": {("mg", "milligram"): Fraction(1, 1000), ("g", "gram"): Fraction(1), ("kg", "kilogram"): Fraction(1000),
             ("tonne",): Fraction(10**6), ("lb", "lbs", "pound"): Fraction(45359237, 10**5),
             ("oz", "ounce"): Fraction(28349523125, 10**9)},
    "time": {("ms", "millisecond"): Fraction(1, 1000), ("s", "sec", "second"): Fraction(1),
             ("min", "minute"): Fraction(60), ("h", "hr", "hour"): Fraction(3600), ("day",): Fraction(86400),
             ("week", "wk"): Fraction(604800)},
    "volume": {("ml", "mL", "milliliter", "millilitre"): Fraction(1, 1000), ("l", "L", "liter", "litre"): Fraction(1)},
    "money": {("cent", "¢"): Fraction(1, 100), ("dollar",): Fraction(1)},
}
for _quantity, _sizes in _UNIT_TABLE.items():
    for _names, _size in _sizes.items():
        for _name in _names:
            _UNIT_SIZES[_name] = (_quantity, _size)

Unit = tuple[tuple[tuple[str, int], ...], Fraction]  # ((quantity, power), ...) sorted, and its size
_LATEX_TEXT = re.compile(r"\\(?:text|textnormal|textrm|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_UNIT_SPLIT = re.compile(r"^(?P<number>.*?(?:[\d}]|\\pi))\s*(?P<unit>[A-Za-z¢][A-Za-z\s./^\d²³{}-]*)$")
_POWER = re.compile(r"^(?P<name>[A-Za-z¢]+)(?:\^\{?(?P<exp>[23])\}?|(?P<sup>[²³]))?$")


def _unit_word(word: str) -> tuple[str, Fraction] | None:
    for name in (word, word.lower(), word[:-1] if word.endswith("s") and len(word) > 3 else word,
                 word.lower()[:-1] if word.lower().endswith("s") and len(word) > 3 else word.lower()):
        if name in _UNIT_SIZES:
            return _UNIT_SIZES[name]
    return None


def _parse_unit(text: str) -> Unit | None:
    """'km', 'meters', 'cm^2', 'square feet', 'km/h', 'miles per hour' -> (quantity powers, size); None if any
    word is not a unit of the table."""
    text = re.sub(r"\bper\b", "/", text.replace("\\", " ").strip().rstrip("."))
    text = re.sub(r"\b(?:square|sq\.?)\s+([A-Za-z]+)", r"\1^2", text)
    text = re.sub(r"\bcubic\s+([A-Za-z]+)", r"\1^3", text)
    powers: dict[str, int] = {}
    size = Fraction(1)
    for sign, part in zip((1, -1), text.split("/", 1)):
        words = part.split()
        if not words:
            return None
        for word in words:
            m = _POWER.match(word)
            found = _unit_word(m.group("name")) if m else None
            if m is None or found is None:
                return None
            exp = int(m.group("exp") or {"²": 2, "³": 3}.get(m.group("sup") or "", 1)) * sign
            powers[found[0]] = powers.get(found[0], 0) + exp
            size *= found[1] ** exp
    return tuple(sorted((q, e) for q, e in powers.items() if e)), size


def split_unit(value: str) -> tuple[str, Unit] | None:
    """(number, unit) when ``value`` is a number-like expression followed by a unit of the table
    ('2\\,\\text{km}', '90 minutes', '3 \\mathrm{cm}^2'); None otherwise (no unit, or one not in the table, or a
    value over UNIT_VALUE_MAX characters)."""
    if len(value) > UNIT_VALUE_MAX:
        return None
    plain = _LATEX_TEXT.sub(r" \1 ", unwrap(value, keep_text=True))
    plain = re.sub(r"\s+(?=\^)", "", re.sub(r"\\[,;:! ]|~", " ", plain).replace("$", "")).strip()
    m = _UNIT_SPLIT.match(plain)
    if m is None or re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", m.group("number"))):
        return None
    unit = _parse_unit(m.group("unit"))
    return (m.group("number").strip(), unit) if unit is not None and unit[0] else None


def in_unit(number: str, size: Fraction) -> str:
    """``number`` (a number or a LaTeX expression) multiplied by the exact factor ``size``."""
    plain = canonical_number(number)
    if plain is not None:
        exact = Fraction(plain) * size
        if not _terminates(exact):
            return f"\\frac{{{exact.numerator}}}{{{exact.denominator}}}"
        with decimal.localcontext() as context:
            context.prec = 128  # a terminating fraction of <= 80-digit numbers: exact at this precision
            written = str(decimal.Decimal(exact.numerator) / exact.denominator)
        return canonical_number(written) or written
    factor = str(size.numerator) if size.denominator == 1 else f"\\frac{{{size.numerator}}}{{{size.denominator}}}"
    return f"\\left({number}\\right) \\cdot {factor}"


def _terminates(x: Fraction) -> bool:
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def key(value: str) -> str:
    """Comparison key of a container value (two boxes with the same key are the same answer)."""
    value = normalise_latex(strip_units(unwrap(value)))
    return _SPACES.sub("", value).casefold()


# ------------------------------------------------------------------------------------ final answer --

def _retracted(after: str, answer: str) -> bool:
    """A retraction cue after the final container that names another value ("no wait, it is 6"), or a
    strong one naming none ("that is wrong"). A re-check that lands on the same value is not one."""
    cue = _RETRACTION.search(after[:400])
    if cue is None:
        return False
    rest = after[cue.start():cue.start() + 400]
    numbers = _NUMBER_TOKEN.findall(rest)
    if numbers:
        return key(numbers[-1]) != key(strip_units(answer))
    # no value named: a re-check ("wait, let me verify") keeps the answer; anything else revokes it
    return bool(_STRONG_RETRACTION.search(rest)) or not _RECHECK.search(rest)


# The boxed value rejected in so many words. After the container: "it is not 12", "12 is not the answer",
# "12 is incorrect", "rule out 12"; right before it: "the answer is not \\boxed{12}", "x \\neq \\boxed{12}".
# Only a rejection naming the boxed value counts: "\\boxed{12}, not 15" and "12 is not prime" keep it.
_NUM = r"\$?\s*([-+]?\d[\d,]*(?:\.\d+)?)(?![\d.]\d)"
_REJECT_AFTER = (
    re.compile(r"\b(?:it|this|that|the (?:final )?answer|the result|the value|the solution|[a-z])\s*(?:'s|is|was|must|"
               r"can|could|would)?\s*(?:not|n't|never|cannot|can't|can not)\s*(?:be\s+|equal\s+(?:to\s+)?)?" + _NUM,
               re.I),
    re.compile(_NUM + r"\$?\s+(?:is|was|'s)\s*(?:not|n't|never)\s+(?:the\s+|a\s+)?(?:final\s+)?(?:answer|correct|"
               r"right|valid|possible|solution)\b", re.I),
    re.compile(_NUM + r"\$?\s+(?:is|was|'s)\s+(?:wrong|incorrect|invalid|impossible|not right)\b", re.I),
    re.compile(_NUM + r"\$?\s+(?:cannot|can't|can not|couldn't|could not)\s+be\s+(?:the\s+)?(?:answer|right|correct)",
               re.I),
    re.compile(r"\b(?:rule[sd]? out|reject(?:s|ed)?|discard(?:s|ed)?|eliminate[sd]?)\s+" + _NUM, re.I),
)
# the container itself ("\\boxed{12} is wrong"), or the next words pointing back at it ("That can't be the
# answer", "which is incorrect"); no value named, so only right after the container
_REJECT_SELF = re.compile(r"^[\s$)\]\\]*(?:(?:is|was|'s)\s*(?:not|n't)\s+(?:the\s+)?(?:answer|correct|right|valid)\b"
                          r"|(?:is|was)\s+(?:wrong|incorrect|invalid|ruled out|rejected|eliminated)\b)", re.I)
_REJECT_NEAR = re.compile(r"\b(?:this|that|it|which)\s*(?:is|was|'s|can|could)?\s*(?:not|n't|cannot|can't|couldn't)\s+"
                          r"(?:be\s+)?"
                          r"(?:correct|right|the (?:correct |right |final )?answer)\b"
                          r"|\b(?:this|that|which)\s+(?:is|was)\s+(?:wrong|incorrect)\b", re.I)
_REJECT_BEFORE = re.compile(r"(?:\b(?:not|never|cannot be|can't be|isn't|is not|rule[sd]? out|reject|"
                            r"eliminate)|\\neq?|≠|\\not=)\s*(?:equal\s+(?:to\s+)?)?[$\s]*(?:\\\(|\\\[)?[$\s]*$", re.I)


def _first_sentences(after: str, count: int = 2) -> str:
    """The text right after the container up to the end of its ``count``-th sentence (at most 200 chars)."""
    ends = [m.end() for m in re.finditer(r"[.!?](?:\s|$)|\n", after[:200])]
    return after[:ends[count - 1]] if len(ends) >= count else after[:200]


def _rejected(before: str, after: str, answer: str) -> bool:
    """The completion's own words reject the boxed value (see _REJECT_AFTER / _REJECT_BEFORE)."""
    before, after = before.replace("\u2019", "'"), after.replace("\u2019", "'")  # typographic apostrophes
    if _REJECT_BEFORE.search(before[-80:]) or _REJECT_SELF.match(after) or _REJECT_NEAR.search(_first_sentences(after)):
        return True
    value = key(strip_units(answer))
    window = after[:600]
    return any(key(m.group(1)) == value for pattern in _REJECT_AFTER for m in pattern.finditer(window))


def _trailing_ok(after: str, how: str) -> bool:
    """Only closing delimiters, punctuation and markdown may follow the container (trailing_text: forbid)."""
    rest = after.strip()
    if how == "hash_answer":
        return not rest
    return not re.sub(r"[\s$.,;:!)\]*_`]|\\\)|\\\]|</?[a-z]+>", "", rest)


def _opening(text: str, end: int, content: str) -> str:
    """The text before the final container, without its opening marker (``\\boxed{``, ``<answer>``)."""
    before = text[:max(0, text.rfind(content, 0, end))]
    for marker in (*_BOXED, "<answer>"):
        if before.endswith(marker):
            return before[: -len(marker)]
    return before


def final_answers(text: str, how: str, trailing: str = "allow",
                  is_gold: Callable[[str], bool] | None = None) -> tuple[list[str], str]:
    """(values, reason): the distinct final answers a reader would take, in order, and why.

    ``values`` is empty unless ``reason`` is "ok" or "several_values"; with "several_values" the
    caller decides (a multi-value gold accepts several boxes naming exactly its values). A value
    for which ``is_gold(value)`` holds is never a hedge (a gold answer that itself says "or").
    """
    body = after_thinking(text)
    if body is None:
        return [], "unbalanced"
    text = body
    found, closed = containers(text, how)
    if not found:
        return [], "unbalanced" if not closed else "no_container"
    content, end = found[-1]
    if not closed:
        return [], "unbalanced"
    after = text[end:]
    if trailing == "forbid" and not _trailing_ok(after, how):
        return [], "trailing_text"
    if not unwrap(content):
        return [], "empty_container"
    if _retracted(after, unwrap(content)):
        return [], "retraction"
    if _rejected(_opening(text, end, content), after, unwrap(content)):
        return [], "rejected"
    values, keys = [], []
    for content, _ in found:
        value = unwrap(content)
        if not value:
            continue
        if is_hedge(value) and not (is_gold is not None and is_gold(value)):
            return [], "hedge_or"
        k = key(value)
        if k not in keys:
            keys.append(k)
            values.append(value)
    return values, "ok" if len(values) == 1 else "several_values"


def format_reason(text: str, how: str, trailing: str = "allow") -> str:
    """"ok" when ``text`` has a final, closed, non-empty ``how`` container (trailing text per ``trailing``),
    else the reason id. Hedges are a correctness matter: the format only asks whether there is an answer."""
    body = after_thinking(text)
    if body is None:
        return "unbalanced"
    text = body
    found, closed = containers(text, how)
    if not closed:
        return "unbalanced"
    if not found:
        return "no_container"
    content, end = found[-1]
    if not unwrap(content):
        return "empty_container"
    if trailing == "forbid" and not _trailing_ok(text[end:], how):
        return "trailing_text"
    return "ok"


# ------------------------------------------------------------------------------------ other shapes --

_NUMBER_ANYWHERE = re.compile(r"(?<![\w.])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_LINE_HEDGE = re.compile(r"\b(?:or|either|maybe|possibly)\b|/", re.IGNORECASE)


def last_numbers(text: str) -> list[str]:
    """The final-line answer: the last number on the last non-empty line (else the text's last number); both
    numbers when that line hedges ("3 or 4")."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    numbers = _NUMBER_ANYWHERE.findall(lines[-1]) or _NUMBER_ANYWHERE.findall(text)[-1:]
    if len(numbers) > 1 and _LINE_HEDGE.search(lines[-1]):
        return numbers
    return numbers[-1:]


def last_fenced(text: str, languages: tuple[str, ...]) -> str | None:
    """The last ``` fenced block whose language is one of ``languages`` ("" = no language).

    Pairs fences with str.find, so a megabyte of unclosed fences stays linear.
    """
    found, pos = None, 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return found
        newline = text.find("\n", start + 3)
        if newline < 0:
            return found
        end = text.find("```", newline + 1)
        if end < 0:
            return found
        language = text[start + 3:newline].strip().lower()
        if language in languages:
            found = text[newline + 1:end]
        pos = end + 3


_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _too_deep(candidate: str, max_depth: int) -> bool:
    if candidate.count("[") + candidate.count("{") <= max_depth:  # only then can nesting exceed the limit
        return False
    depth = 0
    for ch in _BRACKETS.findall(_STRING_LITERAL.sub("", candidate)):
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def json_payload(text: str, extract: str, max_bytes: int, max_depth: int) -> tuple[bool, object]:
    """(parsed, value) for the completion's JSON; (False, None) when missing, too big, too deep or invalid.

    ``extract``: answer_tag (the last ``<answer>`` block), auto (the last ```json or bare fence, else the whole
    answer) or none (the whole answer). Size and nesting are checked before json.loads, so a huge or deeply
    nested document is refused quickly instead of exhausting the recursion limit or the time budget. Only the
    text after the last </think> is the answer: a JSON object inside the reasoning followed by a refusal is none.
    """
    body = after_thinking(text)
    if body is None:
        return False, None  # stopped inside its reasoning
    candidate: str | None = body
    if extract == "answer_tag":
        blocks, closed = tag_blocks(body, "answer")
        candidate = blocks[-1][0] if blocks and closed else None
    elif extract == "auto":
        fenced = last_fenced(body, ("json", ""))
        candidate = fenced if fenced is not None else body
    candidate = (candidate or "").strip()
    if not candidate or candidate[0] not in '{["-0123456789tfn':  # cannot be JSON: skip the parser
        return False, None
    if len(candidate.encode("utf-8", "surrogatepass")) > max_bytes or _too_deep(candidate, max_depth):
        return False, None
    try:
        return True, json.loads(candidate)
    except (ValueError, RecursionError):
        return False, None


def _last(values: list[str]) -> str | None:
    return values[-1] if values else None


def final_answer(text: str, how: str) -> str | None:
    """The final answer a reader takes from ``text`` read as ``how`` — a container (boxed, answer_tag,
    hash_answer, answer_is, any: the first of those present, else the final line's number), ``last_number``,
    ``json_object`` (a JSON object, fenced or bare) or ``none`` (the whole text) — or None when there is none:
    no container after the reasoning, an unclosed or empty one. Hedges and retractions are the rewards'
    judgement (:func:`final_answers`), not this question."""
    body = after_thinking(text)
    if body is None:
        return None
    if how == "last_number":
        return _last(last_numbers(body))
    if how == "json_object":
        ok, value = json_payload(body, "auto", 1_000_000, 1000)
        return body if ok and isinstance(value, dict) else None
    if how == "none":
        return body.strip() or None
    found, closed = containers(body, "answer_tag" if how == "think_answer" else how)
    if not found and closed and how == "any":
        return _last(last_numbers(body))
    value = unwrap(found[-1][0]) if found and closed else ""
    return value or None
