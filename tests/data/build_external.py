"""Build tests/data/reward_external.jsonl: Math-Verify's own parametrised test cases wrapped as model
completions, plus verifier-pitfall families from published reports.

Usage: python tests/data/build_external.py MATH_VERIFY_GIT_DIR [COMMIT]
(e.g. a clone of https://github.com/huggingface/Math-Verify). Only the derived, labelled rows are
committed (tests/data/README.md gives attribution and licence); Math-Verify's code is not. Deterministic
for a given commit.

Wrapping: a case (gold, pred, expected) becomes a row whose completion is what a model would write for
that pred: a bare expression (optionally in $ $ / \\( \\) / \\[ \\]) is put in a final box after a line of
reasoning (kind boxed_math); a pred that is already prose or already boxed is used as written (kind
math_any / boxed_math). Where a test's "gold" argument is the model output (test_boxed, open_thoughts:
the long text holds the boxes), the roles are swapped. The label is Math-Verify's expected value except
where a careful reader disagrees (OVERRIDES, each with its reason) or where the expectation depends on a
tolerance/strictness argument other than the default (marked ambiguous).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = ["tests/test_all.py", "tests/test_boxed.py", "tests/test_numina_cases.py", "tests/test_open_thoughts.py",
         "tests/test_yujianll.py", "tests/test_strict.py"]
PROMPT = "Solve the problem. Put your final answer within \\boxed{}."
PROMPT_ANY = "Solve the problem and state the final answer."
DELIMS = [("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")]

# (gold, pred) -> (accept, reason): a careful reader disagrees with the test's expectation.
OVERRIDES = {
    ("$1 - \\frac{1}{\\mathrm{e}}$", "$1 + \\frac{1}{\\mathrm{e}}$"): (False, "1 + 1/e is not 1 - 1/e (the test "
                                                                        "pins a parser quirk)"),
}
# Cases whose judgement is a convention no rule settles (decimal comma, spacing inside delimiters, ...).
AMBIGUOUS = {
    ("1000.99", "1000,99"): "decimal comma vs thousands comma",
    ("1,22", "1.22"): "decimal comma",
    ("2.74", "Soucis : 2,74 $ a.."): "decimal comma in French prose",
    ("0,111", "0.111"): "decimal comma",
    ("$9$", "Answer $ \n 9 \n $"): "inline math broken over lines: parser convention",
    ("$9$", "Answer \\( \n 9 \n \\)"): "inline math broken over lines: parser convention",
}

# Tests written as raw strings with doubled backslashes before command names (r"\\le", r"\\boxed"):
# the author meant one backslash (math-verify reads both the same way), so the wrapped row has one.
RAW_DOUBLED = {"test_set_rel_assymetry", "test_boxed"}


def _cases(source: str, path: str):
    """(test name, gold, pred, expected, extra kwargs) for every literal parametrize case in ``source``."""
    tree = ast.parse(source)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
            try:
                values = ast.literal_eval(deco.args[1])
            except ValueError:  # f-strings or computed cases: not literal, left out
                continue
            for case in values:
                params = dict(zip(names, case))
                expected = params.pop("expected", params.pop("result", None))
                if "gold" not in params or "pred" not in params or expected is None:
                    continue
                yield f"{Path(path).stem}::{node.name}", params.pop("gold"), params.pop("pred"), int(expected), params


def _model_output(text: str) -> bool:
    """Text that is a model's answer rather than an answer column (boxes, a 'Final Answer' line)."""
    return "boxed" in text or "Final Answer" in text or "final answer" in text


def _box_contents(text: str) -> list[str]:
    """The contents of every \\boxed{...} in ``text`` (balanced braces)."""
    out, start = [], 0
    while (i := text.find("\\boxed{", start)) >= 0:
        depth, j = 0, i + len("\\boxed")
        for j in range(j, len(text)):  # noqa: B020 - j is the closing brace's index after the loop
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
        out.append(text[i + len("\\boxed{"):j].strip())
        start = j + 1
    return out


def _strip_delims(text: str) -> str | None:
    t = text.strip()
    for left, right in DELIMS:
        if t.startswith(left) and t.endswith(right) and len(t) > len(left) + len(right):
            inner = t[len(left):-len(right)].strip()
            return inner if "$" not in inner and "\\(" not in inner else None
    return t if "$" not in t and "\\(" not in t and "\\[" not in t else None


def _looks_like_answer(expr: str) -> bool:
    """A bare expression a model would box (no sentence around it)."""
    bare = re.sub(r"\\[A-Za-z]+", "", expr)
    words = re.findall(r"[A-Za-z']{2,}", bare)
    prose = any(len(w) >= 4 for w in words) or len(words) >= 2
    return "\n" not in expr and not prose and "boxed" not in expr


def wrap(gold: str, pred: str):
    """(kind, completion, gold) for one case."""
    if "boxed" in gold and "boxed" not in pred:  # the test's 'gold' is the model output
        gold, pred = pred, gold
    inner = _strip_delims(pred)
    if inner is not None and _looks_like_answer(inner):
        return "boxed_math", f"Working through the problem step by step gives the result.\n\nThe final answer is " \
                             f"$\\boxed{{{inner}}}$.", gold
    kind = "boxed_math" if re.search(r"(?<!\\)\\boxed\{", pred) else "math_any"
    return kind, pred, gold


def math_verify_rows(repo: Path, commit: str) -> list[dict]:
    rows, seen = [], set()
    for path in FILES:
        source = subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{path}"], capture_output=True,
                                text=True, check=True).stdout
        for test, gold, pred, expected, extra in _cases(source, path):
            if extra.get("strict") is False:
                continue  # the strict=True twin is kept; non-strict variable matching is a setting
            if "allow_set_relation_comp" in extra:
                expected = 1  # a relation and its interval name the same set (the test's True variant)
            key = (gold, pred)
            if key in seen:
                continue
            seen.add(key)
            accept, reason = bool(expected), f"Math-Verify expects {'equal' if expected else 'not equal'}"
            if test.split("::")[1] in RAW_DOUBLED:
                gold, pred = (re.sub(r"\\\\(?=[A-Za-z])", r"\\", t) for t in (gold, pred))
            kind, completion, gold_col = wrap(gold, pred)
            boxes = _box_contents(gold_col)
            if boxes and len(gold_col) <= 150:  # both sides are model outputs: the gold column is its boxes
                gold_col = ", ".join(boxes)
                reason += " (gold column: the boxed content of the test's other output)"
                # a 'not equal' there is about extracting from that output, which no longer exists here
                output_gold = not accept
            else:
                output_gold = _model_output(gold_col) or len(gold_col) > 150
            artifact = any(ord(c) < 32 and c not in "\n\t" for c in gold + pred)
            ambiguous = key in AMBIGUOUS or extra.get("precision", 6) != 6 or output_gold or artifact
            if key in OVERRIDES:
                accept, reason = OVERRIDES[key]
            elif key in AMBIGUOUS:
                reason += f"; ambiguous: {AMBIGUOUS[key]}"
            elif output_gold:
                reason += "; ambiguous: the test compares two model outputs, its 'gold' is not an answer column"
            elif artifact:
                reason += "; ambiguous: a control character from a string escape in the test literal"
            elif ambiguous:
                reason += f"; ambiguous: holds only at precision {extra['precision']}"
            rows.append({"kind": kind, "prompt": PROMPT if kind == "boxed_math" else PROMPT_ANY,
                         "completion": completion, "gold": gold_col,
                         "accept": accept, "reason": reason, "rule": f"mv:{test.split('::')[1]}",
                         "ambiguous": ambiguous, "source": f"Math-Verify {path} ({test.split('::')[1]})"})
    return rows


def _fam(rule, source, cases):
    return [{"kind": kind, "prompt": PROMPT, "completion": completion, "gold": gold, "accept": accept,
             "reason": reason, "rule": rule, "ambiguous": False, "source": source}
            for kind, completion, gold, accept, reason in cases]


def pitfall_rows() -> list[dict]:
    """Verifier-pitfall families from published reports, each a small set of right and wrong cases."""
    b = "boxed_math"
    rows = []
    rows += _fam("pit:gold_partial_parse", "measured on TRL accuracy_reward and open-r1; verl not "
                 "affected", [
        (b, "So the answer is $\\boxed{10}$.", "10\\sqrt{2}", False, "coefficient of 10\\sqrt{2}"),
        (b, "So the answer is $\\boxed{10\\sqrt{2}}$.", "10\\sqrt{2}", True, "the gold itself"),
        (b, "So the answer is $\\boxed{7}$.", "[-2, 7]", False, "one endpoint"),
        (b, "So the answer is $\\boxed{[-2, 7]}$.", "[-2, 7]", True, "the interval"),
        (b, "So the answer is $\\boxed{7}$.", "3, 5, 7", False, "last element only"),
        (b, "So the answer is $\\boxed{3, 5, 7}$.", "3, 5, 7", True, "the whole list"),
        (b, "So the answer is $\\boxed{2}$.", "2\\pi", False, "coefficient of 2\\pi"),
        (b, "So the answer is $\\boxed{2\\pi}$.", "2\\pi", True, "the gold itself"),
        (b, "So the answer is $\\boxed{3}$.", "3\\sqrt{3}", False, "coefficient of 3\\sqrt{3}"),
        (b, "So the answer is $\\boxed{5}$.", "5 - \\sqrt{2}", False, "first term only"),
        (b, "So the answer is $\\boxed{2}$.", "\\frac{\\pi}{2}", False, "denominator of \\pi/2"),
        (b, "So the answer is $\\boxed{\\frac{\\pi}{2}}$.", "\\frac{\\pi}{2}", True, "the gold itself"),
        (b, "So the answer is $\\boxed{4}$.", "(4, 5)", False, "one coordinate"),
        (b, "So the answer is $\\boxed{(4,5)}$.", "(4, 5)", True, "the point"),
    ])
    rows += _fam("pit:unparseable_gold", "open-r1#293, huggingface/cookbook#335 (reward 1 when the gold "
                 "does not parse)", [
        (b, "The answer is $\\boxed{42}$.", "\\text{the midpoints form a regular hexagon}", False,
         "a number is not the stated geometric fact"),
        (b, "I am not sure.", "\\text{Tuesday}", False, "no answer at all"),
        (b, "The answer is $\\boxed{1}$.", "", False, "empty gold: nothing can be correct"),
    ])
    rows += _fam("pit:argument_order", "open-r1#557 (verify(answer, gold) vs verify(gold, answer))", [
        (b, "Thus $\\boxed{x = 5}$.", "5", True, "x = 5 names the value 5"),
        (b, "Thus $\\boxed{5}$.", "x = 5", True, "5 is the value of x"),
        (b, "Hence $\\boxed{-2 \\le x \\le 7}$.", "[-2, 7]", True, "the inequality names the interval"),
        (b, "Hence $\\boxed{x \\ge -2}$.", "[-2, 7]", False, "a half-line is not the interval"),
    ])
    rows += _fam("pit:reasoning_content", "huggingface/trl#4563 (answers inside reasoning bias the grader)", [
        ("boxed_math", "<think>\nMaybe \\boxed{12}? Let me recompute... 3 x 5 = 15.\n</think>\n\nThe answer is "
         "$\\boxed{15}$.", "15", True, "final box after the reasoning is right"),
        ("boxed_math", "<think>\nIt should be \\boxed{15}. Hmm, but the problem says 3 x 4.\n</think>\n\nThe "
         "answer is $\\boxed{12}$.", "15", False, "the gold appears only in the reasoning"),
        ("boxed_math", "<think>\nThe product 3 x 5 is \\boxed{15} and then I need to", "15", False,
         "truncated inside the reasoning: no final answer"),
    ])
    rows += _fam("pit:hedge", "verifier pitfall: hedges credited by math-verify based rewards", [
        (b, "$\\boxed{12 \\text{ or } 13}$", "12", False, "\\text{ or } hedge"),
        (b, "$\\boxed{7.5 \\text{ or 8 hours}}$", "7.5", False, "hedge with unit"),
        (b, "$\\boxed{13 \\text{ (or 14)}}$", "13", False, "parenthetical alternative"),
        (b, "$\\boxed{13}$ or $\\boxed{14}$", "13", False, "two different boxes"),
        (b, "$\\boxed{13}$, i.e. $\\boxed{13}$", "13", True, "same value twice"),
        (b, "$\\boxed{\\pm 3}$", "3", False, "\\pm where the gold is single"),
        (b, "$\\boxed{7}$\n\nNo wait, it is 6.", "7", False, "retraction after the box"),
        (b, "$\\boxed{12 \\text{ hours}}$", "12", True, "a unit is not a hedge"),
    ])
    rows += _fam("pit:multi_answer", "verifier pitfall: legitimate multi-answer output refused", [
        (b, "The roots are $\\boxed{2}$ and $\\boxed{3}$.", "2, 3", True, "both roots boxed"),
        (b, "The roots are $\\boxed{3}$ and $\\boxed{2}$.", "2, 3", True, "both roots, other order"),
        (b, "The root is $\\boxed{2}$.", "2, 3", False, "one root of two"),
        (b, "$x = \\boxed{-1}$ or $x = \\boxed{1}$", "\\pm 1", True, "both signs boxed"),
    ])
    rows += _fam("pit:tex_shorthand", "verifier pitfall: valid TeX shorthand refused", [
        (b, "$\\boxed{\\frac13}$", "\\frac{1}{3}", True, "\\frac13"),
        (b, "$\\boxed{\\sqrt3}$", "\\sqrt{3}", True, "\\sqrt3"),
        (b, "$\\boxed{\\tfrac12}$", "\\frac{1}{2}", True, "\\tfrac12"),
        (b, "$\\boxed{\\dfrac{3}{4}}$", "\\frac{3}{4}", True, "\\dfrac"),
        (b, "$\\boxed{2\\sqrt5}$", "2\\sqrt{5}", True, "\\sqrt5"),
    ])
    rows += _fam("pit:number_forms", "verifier pitfall: thousands separators, e-notation, Unicode digits refused", [
        (b, "$\\boxed{1\\,200}$", "1200", True, "thin space"),
        (b, "$\\boxed{1 200}$", "1200", True, "plain space"),
        (b, "$\\boxed{1{,}200}$", "1200", True, "{,}"),
        (b, "$\\boxed{1.2e4}$", "12000", True, "e-notation"),
        (b, "$\\boxed{1.2e4}$", "1200", False, "e-notation of another number"),
        (b, "$\\boxed{１２００}$", "1200", True, "full-width digits"),
        (b, "$\\boxed{١٢٠٠}$", "1200", True, "Arabic-Indic digits"),
        (b, "$\\boxed{1200.0}$", "1,200", True, "decimal vs comma gold"),
    ])
    rows += unit_rows() + decimal_rows() + rejected_rows()
    return rows


# Instruct-model closing styles the three families below are written in (Qwen2.5-Math, Llama-3, GPT-4o,
# DeepSeek-R1): the same answer appears in each, so a rule that depends on the style shows.
def _styled(i: int, work: str, box: str, tail: str = "") -> str:
    styles = (
        lambda: f"{work}\n\nTherefore, the final answer is $\\boxed{{{box}}}$.{tail}",
        lambda: f"## Step 1: Set up\n{work}\n\nThe final answer is: $\\boxed{{{box}}}${tail}",
        lambda: f"{work}\n\n**Answer:** \\(\\boxed{{{box}}}\\){tail}",
        lambda: f"<think>\n{work}\n</think>\n\n{work.split('.')[0]}, so the answer is $\\boxed{{{box}}}$.{tail}",
    )
    return styles[i % len(styles)]()


def unit_rows() -> list[dict]:
    """An answer in another unit than the gold's: math-verify's NormalizationConfig(units=True) drops unit words,
    so the same number in another unit of the same quantity passed; the same quantity converted exactly is right."""
    b = "boxed_math"
    # (gold, wrong answer: same number / wrong conversion / other quantity, why; right answer in another form, why)
    pairs = [
        ("5 \\text{ cm}", "5 \\text{ m}", "5 m is 100 times 5 cm", "5 \\text{ centimeters}", "the same unit spelled out"),
        ("2000 \\text{ m}", "2000 \\text{ km}", "2000 km is 1000 times 2000 m", "2 \\text{ km}", "2 km = 2000 m exactly"),
        ("1.5 \\text{ hours}", "1.5 \\text{ minutes}", "1.5 minutes is not 1.5 hours", "90 \\text{ minutes}",
         "90 min = 1.5 h exactly"),
        ("3 \\text{ kg}", "3 \\text{ g}", "3 g is a thousandth of 3 kg", "3000 \\text{ g}", "3000 g = 3 kg exactly"),
        ("12 \\text{ inches}", "12 \\text{ feet}", "12 feet is 144 inches", "1 \\text{ foot}", "1 ft = 12 in exactly"),
        ("45 \\text{ minutes}", "45 \\text{ seconds}", "45 s is not 45 min", "2700 \\text{ seconds}",
         "2700 s = 45 min exactly"),
        ("250 \\text{ mL}", "250 \\text{ L}", "250 L is 1000 times 250 mL", "0.25 \\text{ L}", "0.25 L = 250 mL exactly"),
        ("60 \\text{ km/h}", "60 \\text{ m/s}", "60 m/s is 216 km/h", "60 \\text{ kilometers per hour}",
         "the same unit spelled out"),
        ("50 \\text{ cents}", "50 \\text{ dollars}", "50 dollars is 100 times 50 cents", "0.5 \\text{ dollars}",
         "0.50 dollars = 50 cents exactly"),
        ("8 \\text{ cm}^2", "8 \\text{ m}^2", "8 m^2 is 10000 times 8 cm^2", "800 \\text{ mm}^2",
         "800 mm^2 = 8 cm^2 exactly"),
        ("3 \\text{ km}", "3 \\text{ kg}", "a mass is not a distance", "3\\,\\text{km}", "thin space before the unit"),
        ("20 \\text{ minutes}", "20 \\text{ meters}", "a length is not a duration", "20",
         "a bare number: the question set the unit"),
        ("7 \\text{ feet}", "7 \\text{ yards}", "7 yards is 21 feet", "84 \\text{ inches}", "84 in = 7 ft exactly"),
        ("2.5 \\text{ kg}", "2500 \\text{ kg}", "2.5 kg converted the wrong way", "2500 \\text{ g}",
         "2500 g = 2.5 kg exactly"),
        ("90 \\text{ minutes}", "1.2 \\text{ hours}", "1.2 h is 72 minutes, not 90", "1.5 \\text{ hours}",
         "1.5 h = 90 min exactly"),
        ("4 \\text{ miles}", "4 \\text{ km}", "4 km is about 2.5 miles", "4 \\text{ mi}", "the unit's abbreviation"),
        ("36 \\text{ inches}", "36 \\text{ cm}", "36 cm is about 14 inches", "3 \\text{ feet}", "3 ft = 36 in exactly"),
        ("100 \\text{ seconds}", "100 \\text{ minutes}", "100 minutes is 6000 seconds", "100 \\text{ s}",
         "the unit's symbol"),
    ]
    work = "Converting each quantity to the same unit and combining the given values step by step gives the result"
    rows = []
    for i, (gold, wrong, why_wrong, right, why_right) in enumerate(pairs):
        rows.append((b, _styled(i, work + ".", wrong), gold, False, f"other unit: {why_wrong}"))
        rows.append((b, _styled(i + 1, work + ".", right), gold, True, f"same quantity: {why_right}"))
    rows.append((b, _styled(0, work + ".", "36 \\text{ inches}"), "36", True,
                 "the gold has no unit: a unit in the answer is not a hedge"))
    return _fam("pit:unit_mismatch", "math-verify NormalizationConfig(units=True) removes unit words before "
                "comparing (Math-Verify README, 'units')", rows)


def decimal_rows() -> list[dict]:
    """A different decimal value: math-verify's default float_rounding=6 rounds both sides to 6 decimal places,
    so a value differing in a late significant digit passed; the same value written differently is right."""
    b = "boxed_math"
    pairs = [  # gold, a value that differs in a late digit, the same value in another form
        ("3.1415927", "3.1415929", "3.14159270"), ("2.7182818", "2.7182813", "2.71828180"),
        ("1.4142136", "1.4142133", "1.414213600"), ("0.3333333", "0.3333331", ".3333333"),
        ("12.0000011", "12.0000014", "12.0000011"), ("5", "5.0000001", "5.0"), ("100", "100.0000004", "100.00"),
        ("0.1234567", "0.1234568", "1.234567 \\times 10^{-1}"), ("9.8696044", "9.8696041", "9.8696044"),
        ("1.7320508", "1.7320504", "1.7320508000"), ("2.2360680", "2.2360677", "2.236068"),
        ("6.2831853", "6.2831850", "6.283\\,185\\,3"), ("0.7071068", "0.7071066", "0.70710680"),
        ("42", "42.0000003", "42.0"), ("1000000.5", "1000000.4999999", "1{,}000{,}000.5"),
        ("0.6931472", "0.6931469", "0.69314720"), ("0.0000125", "0.0000126", "1.25 \\times 10^{-5}"),
    ]
    work = "Carrying every digit through the computation and rounding only at the end gives the value"
    rows = []
    for i, (gold, wrong, right) in enumerate(pairs):
        rows.append((b, _styled(i, work + ".", wrong), gold, False,
                     f"{wrong} is another value than {gold} (they differ in a late significant digit)"))
        rows.append((b, _styled(i + 1, work + ".", right), gold, True, f"{right} is {gold} written another way"))
    return _fam("pit:decimal_tolerance", "math-verify verify(float_rounding=6): both floats rounded to 6 decimal "
                "places before comparing (math_verify.grader.sympy_numeric_eq)", rows)


def rejected_rows() -> list[dict]:
    """A boxed value the completion's own words reject is not its final answer; a negation about another value,
    or about something else, leaves the box standing."""
    b = "boxed_math"
    work = "Each of the 4 rows holds 3 seats, so counting the seats row by row gives 4 \\times 3"
    rejected = [
        ("Thus the answer is $\\boxed{12}$.\n\nWait, checking: 12 \\times 3 = 36 \\neq 45, so it is not 12.",
         "'so it is not 12' rejects the box"),
        ("Therefore, $x$ cannot be $\\boxed{12}$.", "'cannot be \\boxed{12}'"),
        ("The final answer is $\\boxed{12}$. However, 12 is not the correct answer, since it fails the second "
         "condition.", "'12 is not the correct answer'"),
        ("**Answer:** $\\boxed{12}$\n\nHmm, 12 does not satisfy the last constraint, so 12 is wrong.", "'12 is wrong'"),
        ("The count is $\\boxed{12}$. But 12 can't be right, since the total must be odd.", "'12 can't be right'"),
        ("The answer is $\\boxed{12}$, but this is not correct: substituting back gives 13 on the left.",
         "'this is not correct' right after the box"),
        ("So $x = \\boxed{12}$? No, 12 is not a solution, since the denominator vanishes there.",
         "'12 is not a solution'"),
        ("We can rule out $\\boxed{12}$ because it is even.", "the box is what is ruled out"),
        ("Hence the number of ways is not $\\boxed{12}$, as the two orders are the same.", "'is not \\boxed{12}'"),
        ("The final answer is: $\\boxed{12}$\n\nActually no, it isn't 12 — I counted the corner seat twice.",
         "'it isn't 12'"),
        ("This gives $\\boxed{12}$. That can't be the answer, since 12 > 10 violates the bound.",
         "'That can't be the answer'"),
        ("I get $\\boxed{12}$, which is wrong.", "'which is wrong' right after the box"),
        ("$\\boxed{12}$, no, 12 is impossible here because $n$ must be odd.", "'12 is impossible'"),
        ("Answer: $\\boxed{12}$ (this is incorrect; the correct count is 15)", "'this is incorrect'"),
        ("The sum is $\\boxed{12}$. But we need the product, so 12 is not the answer.", "'12 is not the answer'"),
        ("Therefore $n = \\boxed{12}$ is ruled out, and no valid $n$ exists.", "the box itself is ruled out"),
        ("The result would be $\\boxed{12}$; however the answer cannot be 12 because the seats are shared.",
         "'the answer cannot be 12'"),
    ]
    kept = [
        ("So the answer is $\\boxed{12}$, not 15.", "'not 15' rejects another value"),
        ("It is not 15; it is $\\boxed{12}$.", "the negation is about 15"),
        ("The final answer is $\\boxed{12}$. Note that 12 is not prime, which is why the pairing works.",
         "'not prime' is a property, not a rejection"),
        ("$\\boxed{12}$ is correct: substituting back gives 36 = 36.", "the completion confirms its box"),
        ("The answer cannot be 13 (odd), so it is $\\boxed{12}$.", "13 is the value rejected"),
        ("The seats are $\\boxed{12}$. This is not a coincidence: each row has the same size.",
         "'not a coincidence' is no rejection"),
        ("We rule out 13 and 14, leaving $\\boxed{12}$.", "13 and 14 are ruled out"),
        ("It's not hard to see that the answer is $\\boxed{12}$.", "'not hard' is about the reasoning"),
        ("Since $x \\neq 3$, we get $x = \\boxed{12}$.", "\\neq applies to 3"),
        ("The final answer is: $\\boxed{12}$\n\nI double-checked: 12 is indeed the correct answer, not 21.",
         "the check confirms 12 and rejects 21"),
        ("**Answer:** $\\boxed{12}$\n\n(Not 12.5: the count must be a whole number.)", "12.5 is the value rejected"),
        ("The answer is $\\boxed{12}$. Is it 13? No, it is not 13.", "13 is the value rejected"),
        ("It cannot be less than 12, and 12 works, so the answer is $\\boxed{12}$.", "a bound, then the box"),
        ("Therefore, the final answer is $\\boxed{12}$. (The answer is not affected by the order of the rows.)",
         "'not affected' is no rejection"),
        ("The answer is $\\boxed{12}$, which is not divisible by 5, as required.", "'not divisible' is a property"),
        ("The answer is not 5 but $\\boxed{12}$.", "'not 5 but' turns to the box"),
        ("So it is $\\boxed{12}$. That is not surprising, since 4 \\times 3 = 12.", "'not surprising' confirms it"),
    ]
    rows = [(b, f"{work}.\n\n{text}", "12", False, f"the completion rejects its box: {why}") for text, why in rejected]
    rows += [(b, f"{work}.\n\n{text}", "12", True, f"the box stands: {why}") for text, why in kept]
    return _fam("pit:rejected_box", "reward hacking reports of boxed answers disowned in the text (a grader reading "
                "only the box credits an answer the model itself calls wrong)", rows)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: build_external.py MATH_VERIFY_GIT_DIR [COMMIT]")
    repo = Path(sys.argv[1])
    commit = sys.argv[2] if len(sys.argv) > 2 else subprocess.run(
        ["git", f"--git-dir={repo}", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    rows = math_verify_rows(repo, commit) + pitfall_rows()
    out = []
    for i, r in enumerate(rows, 1):
        accept = r.pop("accept")
        out.append({"id": f"x{i:04d}", **r, "columns": {"answer": r["gold"]},
                    "label": {"accept": accept, "correct": accept,
                              "well_formed": r["kind"] != "boxed_math" or "\\boxed{" in r["completion"]}})
    (HERE / "reward_external.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in out), encoding="utf-8")
    print(f"{len(out)} rows from Math-Verify {commit[:12]} + pitfall families")


if __name__ == "__main__":
    main()
