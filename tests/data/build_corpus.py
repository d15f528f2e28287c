"""Build tests/data/reward_corpus.jsonl (development set) and reward_heldout.jsonl (kept apart).

Deterministic: run `python tests/data/build_corpus.py` and the two files are rewritten byte for byte.
The two sets share no problem, no style template and no hedge/retraction phrasing: the held-out set is
written by a different generator (Llama-3 / DeepSeek-R1 / GPT phrasings on other problems), so a reward
tuned on the development set is measured on text it has not seen.

Templates mark the answer with «A» (the value shown) so that LaTeX braces need no escaping. Each row:
id, kind (the default spec of tests/data/spec_kinds.yaml it is judged under), prompt, completion, gold,
columns (dataset columns passed to the rewards), label {accept, correct, well_formed}, reason, rule,
ambiguous. See tests/data/README.md for the labelling rules.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
BOX_PROMPT = "{q}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
TAG_PROMPT = ("{q}\nThink inside <think> </think> tags, then give only the final answer inside "
              "<answer> </answer> tags.")
HASH_PROMPT = "{q}\nSolve step by step. End with a line '#### <number>'."

# Label shorthands: (accept, correct, well_formed).
ACCEPT = (True, True, True)
WRONG = (False, False, True)       # well formed, wrong value
MALFORMED_RIGHT = (False, True, False)
REJECT = (False, False, False)     # neither: hedges, truncation, hacks


class Rows:
    def __init__(self, prefix: str):
        self.prefix, self.rows = prefix, []

    def add(self, kind, prompt, completion, gold, label, reason, rule, *, ambiguous=False, columns=None):
        accept, correct, well_formed = label
        if columns is None:
            columns = {"answer": gold}
        self.rows.append({
            "id": f"{self.prefix}{len(self.rows) + 1:04d}", "kind": kind, "prompt": prompt,
            "completion": completion, "gold": gold, "columns": columns,
            "label": {"accept": accept, "correct": correct, "well_formed": well_formed},
            "reason": reason, "rule": rule, "ambiguous": ambiguous})


def fill(template: str, value: str, **extra: str) -> str:
    text = template.replace("«A»", value)
    for key, val in extra.items():
        text = text.replace(f"«{key}»", val)
    return text


# ------------------------------------------------------------------------------------ problems --
# GSM8K-style word problems: (question, worked reasoning, answer, a plausible wrong answer, noun phrase).
GSM_DEV = [
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
     "clips did Natalia sell altogether in April and May?",
     "In May Natalia sold 48 / 2 = 24 clips.\nAltogether she sold 48 + 24 = 72 clips.", "72", "24", "clips"),
    ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did "
     "she earn?", "Weng earns 12 / 60 = $0.2 per minute.\nFor 50 minutes she earned 0.2 x 50 = $10.", "10", "12",
     "dollars"),
    ("Betty needs $100 for a wallet. She has half of it, her parents give her $15 and her grandparents twice "
     "as much as her parents. How much more money does Betty need?",
     "Betty has 100 / 2 = $50. Her grandparents give 15 x 2 = $30.\nShe still needs 100 - 50 - 30 - 15 = $5.",
     "5", "20", "dollars"),
    ("Julie is reading a 120-page book. Yesterday she read 12 pages and today twice as many. If she wants to "
     "read half of the remaining pages tomorrow, how many pages should she read?",
     "Today she read 12 x 2 = 24 pages, so 12 + 24 = 36 pages so far.\nRemaining: 120 - 36 = 84 pages; half is "
     "84 / 2 = 42.", "42", "84", "pages"),
    ("James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
     "Each time he writes 3 x 2 = 6 pages, twice a week that is 12 pages.\nIn 52 weeks: 12 x 52 = 624 pages.",
     "624", "312", "pages"),
    ("Albert buys 2 large pizzas with 16 slices each and 2 small pizzas with 8 slices each. How many slices "
     "does he eat if he eats all of it?", "Large: 2 x 16 = 32 slices. Small: 2 x 8 = 16 slices.\nTotal 32 + 16 "
     "= 48 slices.", "48", "40", "slices"),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it "
     "take?", "White fiber: 2 / 2 = 1 bolt.\nTotal: 2 + 1 = 3 bolts.", "3", "4", "bolts"),
    ("Tina makes $18.00 an hour. If she works more than 8 hours per shift, she gets overtime at her wage plus "
     "half her wage. She works 10 hours every day for 5 days. How much money does she make?",
     "Regular pay: 8 x 18 = $144 a day. Overtime wage 18 + 9 = $27, 2 hours = $54.\nPer day 144 + 54 = $198; "
     "5 days: 198 x 5 = $990.", "990", "900", "dollars"),
    ("Mark has a garden with 10 yellow flowers, 80% more purple ones, and as many green as 25% of the yellow "
     "and purple together. How many flowers does Mark have?",
     "Purple: 10 x 1.8 = 18. Green: 0.25 x (10 + 18) = 7.\nTotal: 10 + 18 + 7 = 35 flowers.", "35", "28",
     "flowers"),
    ("A factory makes 150 toys an hour and runs 24 hours a day. How many toys does it make in one day?",
     "150 x 24 = 3600 toys a day.", "3600", "3000", "toys"),
    ("A school buys 25 laptops at $480 each. How much does the school spend?",
     "25 x 480 = 12000 dollars.", "12000", "1200", "dollars"),
    ("Each of 5 buses carries 250 passengers. How many passengers do the buses carry in total?",
     "5 x 250 = 1250 passengers.", "1250", "1000", "passengers"),
    ("A baker uses 3 eggs per cake and bakes 7 cakes. How many eggs does she use?",
     "3 x 7 = 21 eggs.", "21", "10", "eggs"),
    ("Tom runs 4 laps of a 400 m track. How many metres does he run?", "4 x 400 = 1600 metres.", "1600",
     "400", "metres"),
    ("A shirt costs $25 and is on sale for 20% off. What is the sale price in dollars?",
     "20% of 25 is 5, so the price is 25 - 5 = 20 dollars.", "20", "5", "dollars"),
    ("Sam has 3 times as many marbles as Ann, who has 14. How many marbles do they have together?",
     "Sam has 3 x 14 = 42. Together 42 + 14 = 56 marbles.", "56", "42", "marbles"),
    ("A tank holds 60 litres and leaks 2.5 litres an hour. How many hours until it is empty?",
     "60 / 2.5 = 24 hours.", "24", "30", "hours"),
    ("Lena saves $35 a week for 12 weeks. How much has she saved?", "35 x 12 = 420 dollars.", "420", "350",
     "dollars"),
]
GSM_HELD = [
    ("Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, and sells the rest at $2 each. How many "
     "dollars does she make every day?", "16 - 3 - 4 = 9 eggs left; 9 x 2 = 18 dollars.", "18", "9", "dollars"),
    ("A farmer plants 36 rows of 45 corn plants. How many plants are there?", "36 x 45 = 1620 plants.",
     "1620", "1500", "plants"),
    ("A car travels 65 km per hour for 6 hours. How far does it go?", "65 x 6 = 390 km.", "390", "360", "km"),
    ("A library has 2400 books and lends out 15% of them. How many books are lent out?",
     "0.15 x 2400 = 360 books.", "360", "240", "books"),
    ("Kim buys 4 notebooks at $3.50 each. How much does she spend?", "4 x 3.50 = 14 dollars.", "14", "12",
     "dollars"),
    ("A pool fills at 120 litres a minute. How many litres after 45 minutes?", "120 x 45 = 5400 litres.",
     "5400", "4500", "litres"),
    ("There are 28 students and each needs 3 pencils. Pencils come in boxes of 12. How many boxes are needed?",
     "28 x 3 = 84 pencils; 84 / 12 = 7 boxes.", "7", "8", "boxes"),
    ("A train has 12 cars with 80 seats each. How many seats in all?", "12 x 80 = 960 seats.", "960", "920",
     "seats"),
    ("Omar reads 18 pages a day. How many pages does he read in 3 weeks?", "3 weeks = 21 days; 18 x 21 = 378 "
     "pages.", "378", "54", "pages"),
    ("A company pays 8 workers $2,500 each per month. What is the monthly payroll?",
     "8 x 2500 = 20000 dollars.", "20000", "2500", "dollars"),
    ("A recipe needs 250 g of flour per loaf. How many grams for 9 loaves?", "250 x 9 = 2250 g.", "2250",
     "2000", "grams"),
    ("Ava had 95 stickers and gave away 38. How many does she have left?", "95 - 38 = 57 stickers.", "57",
     "67", "stickers"),
]

# MATH-style problems: (question, gold as the MATH answer column writes it, [equivalent answers],
# [(near miss, why it is wrong)], rule tag).
MATH_DEV = [
    ("Simplify $\\sqrt{200}$.", "10\\sqrt{2}", ["10\\sqrt{2}", "\\sqrt{200}", "10 \\sqrt 2"],
     [("10", "only the coefficient of 10\\sqrt{2}"), ("\\sqrt{2}", "drops the factor 10")], "gold_latex_whole"),
    ("Solve $|x - 2.5| \\le 4.5$. Give the solution set in interval notation.", "[-2, 7]",
     ["[-2, 7]", "[-2,7]"], [("7", "one endpoint of the interval [-2, 7]"), ("(-2, 7)", "open interval excludes "
                                                                                     "the endpoints")],
     "gold_interval"),
    ("List the odd primes less than 10, separated by commas.", "3, 5, 7", ["3, 5, 7", "3,5,7", "7, 5, 3"],
     [("7", "one element of the list 3, 5, 7"), ("3, 5", "misses 7")], "gold_list"),
    ("What is the circumference of a circle of radius 1?", "2\\pi", ["2\\pi", "2 \\pi", "\\pi \\cdot 2"],
     [("2", "the coefficient of 2\\pi"), ("\\pi", "half the circumference")], "gold_pi"),
    ("What is $\\frac{3}{6}$ in lowest terms?", "\\frac{1}{2}", ["\\frac12", "\\dfrac{1}{2}", "\\tfrac12", "0.5",
                                                                  "1/2"],
     [("\\frac{1}{3}", "a different fraction"), ("2", "the denominator only")], "tex_shorthand"),
    ("Compute $\\sin 60^\\circ$.", "\\frac{\\sqrt{3}}{2}", ["\\frac{\\sqrt3}{2}", "\\frac{1}{2}\\sqrt{3}",
                                                            "\\dfrac{\\sqrt{3}}{2}"],
     [("\\frac{3}{2}", "drops the root"), ("\\sqrt{3}", "drops the halving")], "tex_shorthand"),
    ("Solve $x^2 = 9$. Give all solutions.", "-3, 3", ["-3, 3", "3, -3", "\\pm 3", "x = \\pm 3"],
     [("3", "one of the two roots"), ("-3", "one of the two roots")], "gold_list"),
    ("Simplify $\\sqrt{27}/\\sqrt{9}$.", "\\sqrt{3}", ["\\sqrt3", "\\sqrt{3}", "3^{1/2}"],
     [("3", "drops the root"), ("9", "a different value")], "tex_shorthand"),
    ("Find the intersection of $y = x - 4$ and $y = -x + 2$.", "(3, -1)", ["(3, -1)", "(3,-1)"],
     [("(-1, 3)", "coordinates swapped"), ("3", "only the x-coordinate")], "gold_tuple"),
    ("Expand $(x + 1)^2$.", "x^2 + 2x + 1", ["x^2 + 2x + 1", "x^2+2x+1", "1 + 2x + x^2"],
     [("x^2 + 1", "drops the cross term"), ("2x", "one term")], "gold_expression"),
    ("What is $\\frac{1}{4} + \\frac{1}{12}$?", "\\frac{1}{3}", ["\\frac13", "\\frac{1}{3}", "\\frac{4}{12}"],
     [("3", "the denominator only"), ("0.33", "a rounded decimal, not the exact value")], "tex_shorthand"),
    ("The angles of a triangle are $x$, $2x$ and $3x$ degrees. Find $x$.", "30", ["30", "30^\\circ",
                                                                                  "30^{\\circ}"],
     [("60", "the middle angle"), ("90", "the largest angle")], "units"),
    ("Find the area of a circle of radius 3.", "9\\pi", ["9\\pi", "9 \\pi"],
     [("9", "the coefficient of 9\\pi"), ("6\\pi", "the circumference")], "gold_pi"),
    ("Rationalise $\\frac{2}{\\sqrt{2}}$.", "\\sqrt{2}", ["\\sqrt{2}", "\\sqrt2"],
     [("2", "the numerator only"), ("1", "a different value")], "gold_latex_whole"),
]
MATH_HELD = [
    ("Simplify $\\sqrt{72}$.", "6\\sqrt{2}", ["6\\sqrt{2}", "\\sqrt{72}"],
     [("6", "only the coefficient of 6\\sqrt{2}")], "gold_latex_whole"),
    ("Solve $x^2 - 5x + 6 \\le 0$ in interval notation.", "[2, 3]", ["[2, 3]", "[2,3]"],
     [("3", "one endpoint of [2, 3]"), ("(2, 3)", "open interval")], "gold_interval"),
    ("Find all real roots of $(x-1)(x-4)(x-6) = 0$.", "1, 4, 6", ["1, 4, 6", "6, 4, 1"],
     [("6", "one root of three"), ("1, 4", "misses 6")], "gold_list"),
    ("What is the area of a circle with diameter 4?", "4\\pi", ["4\\pi"], [("4", "the coefficient of 4\\pi")],
     "gold_pi"),
    ("Write $0.75$ as a fraction in lowest terms.", "\\frac{3}{4}", ["\\frac34", "\\tfrac{3}{4}", "0.75"],
     [("\\frac{4}{3}", "inverted")], "tex_shorthand"),
    ("Solve $x^2 = 16$.", "-4, 4", ["\\pm 4", "4, -4"], [("4", "one of the two roots")], "gold_list"),
    ("What is $\\sqrt{5} \\cdot \\sqrt{5} \\cdot \\sqrt{5}$?", "5\\sqrt{5}", ["5\\sqrt5", "5\\sqrt{5}"],
     [("5", "only the coefficient")], "gold_latex_whole"),
    ("Where does $y = 2x + 2$ meet the x-axis? Give the point.", "(-1, 0)", ["(-1, 0)", "(-1,0)"],
     [("-1", "only the x-coordinate")], "gold_tuple"),
]

# ------------------------------------------------------------------------------------- styles --
# Boxed styles (template, rule, reason phrase). «R» is the reasoning, «U» the unit noun.
BOX_STYLES_DEV = [
    ("«R»\n\nThe final answer is $\\boxed{«A»}$.", "box_plain", "final box, then only a full stop"),
    ("«R»\n\nTherefore, the answer is \\(\\boxed{«A»}\\) «U» in total.", "box_then_prose",
     "box in \\( \\) followed by prose"),
    ("«R»\n\nSo the result is $\\boxed{«A»}$ «U» altogether.", "box_then_prose", "box in $ $ followed by prose"),
    ("«R»\n\n\\[\n\\boxed{«A»}\n\\]", "box_delims", "box in a \\[ \\] display"),
    ("«R»\n\n**\\boxed{«A»}**", "bold_box", "bold box"),
    ("«R»\n\nFinal Answer: The final answer is $\\boxed{«A»}$. I hope it is correct.", "closing_remark",
     "box followed by 'I hope it is correct.'"),
    ("«R»\n\n$\\boxed{«A»}$\n\nCheck: the steps above add up, so this is consistent. ✓", "box_check_line",
     "box followed by a check line"),
    ("«R»\n\nThe answer is $$\\boxed{«A»}$$", "box_delims", "box in a $$ $$ display"),
    ("## Step 1: Work it out\n«R»\n\n## Step 2: Conclude\nThe final answer is: $\\boxed{«A»}$", "box_plain",
     "Llama-3 step layout ending in a box"),
]
BOX_STYLES_HELD = [
    ("<think>\nLet me work this out.\n«R»\nThat seems right.\n</think>\n\n«R»\n\n**Final Answer**\n\\[\n\\boxed{«A»}\n"
     "\\]", "box_delims", "R1 style: think block, then a boxed display"),
    ("**Solution:**\n\n«R»\n\n**Answer:** $\\boxed{«A»}$ «U»", "box_then_prose", "bold label, box, unit word"),
    ("«R»\n\nHence, the required value is $\\boxed{«A»}$.\n\nLet me know if you have any other questions!",
     "closing_remark", "box followed by an offer of help"),
    ("«R»\n\n**Final answer: \\(\\boxed{«A»}\\)**", "bold_box", "whole final line in bold"),
    ("«R»\n\nThus, we get $\\boxed{«A»}$, which matches the conditions of the problem.", "box_then_prose",
     "box followed by a restatement"),
    ("To solve this, follow the steps.\n\n1. «R»\n\nThe answer: \\(\\boxed{«A»}\\).", "box_delims",
     "GPT numbered steps, box in \\( \\)"),
]
TAG_STYLES_DEV = [
    ("<think>\n«R»\n</think>\n<answer>«A»</answer>", "tag_plain", "think then answer tag"),
    ("<think>\n«R»\n</think>\n<answer>\n«A»\n</answer>", "tag_plain", "answer tag on its own lines"),
    ("<think>\n«R»\n</think>\n<answer>$«A»$</answer>", "tag_delims", "answer in $ $ inside the tag"),
    ("<think>\n«R»\n</think>\n<answer>«A»</answer>\n\nI hope this helps!", "closing_remark",
     "closing remark after the answer tag"),
]
TAG_STYLES_HELD = [
    ("<think>«R»</think> <answer>\\boxed{«A»}</answer>", "tag_delims", "box inside the answer tag"),
    ("<think>\n«R» Let me double-check: yes.\n</think>\n\n<answer> «A» </answer>", "tag_plain",
     "padded answer tag"),
    ("<think>\n«R»\n</think>\n<answer>«A»</answer>\nThe answer is given above.", "closing_remark",
     "a remark after the answer tag"),
]
HASH_STYLES_DEV = [
    ("«R»\n#### «A»", "hash_plain", "GSM8K final line"),
    ("«R»\nThe answer is «A» «U».\n#### «A»", "hash_plain", "restatement then #### line"),
    ("«R»\n\n#### «A»\n\nI hope this helps!", "closing_remark", "#### line followed by a closing remark"),
]
HASH_STYLES_HELD = [
    ("Let's think step by step. «R»\n####«A»", "hash_plain", "#### without a space"),
    ("«R»\n\n#### «A»\n", "hash_plain", "#### line with a trailing newline"),
]

# Hedge / retraction / hack templates: «A» the gold value, «B» a wrong value.
HEDGES_DEV = [
    ("«R»\n\nThe answer is $\\boxed{«A» \\text{ or } «B»}$.", "hedge_text_or", "\\text{ or } inside the box"),
    ("«R»\n\n$\\boxed{«A» \\text{ (or } «B» \\text{)}}$", "hedge_paren", "parenthetical alternative in the box"),
    ("«R»\n\nIt is either $\\boxed{«A»}$ or $\\boxed{«B»}$ depending on how you count.", "hedge_multi_box",
     "two boxes with different values"),
    ("«R»\n\n$\\boxed{«A» \\text{ or } «B» \\text{ «U»}}$", "hedge_text_or", "\\text{ or } with a unit"),
    ("«R»\n\n\\boxed{«B»}\n\nHmm, or maybe \\boxed{«A»}.", "hedge_multi_box", "second box after a doubt"),
    ("«R»\n\n$\\boxed{\\text{either } «A» \\text{ or } «B»}$", "hedge_either", "'either ... or' inside the box"),
    ("«R»\n\n$\\boxed{«A», «B»}$", "hedge_list", "list of two candidates for a single-valued answer"),
]
HEDGES_HELD = [
    ("«R»\n\n**Final Answer:** $\\boxed{«B»}$ (or possibly $\\boxed{«A»}$)", "hedge_multi_box",
     "parenthetical second box"),
    ("«R»\n\n\\[\\boxed{«A» \\ \\text{or}\\ «B»}\\]", "hedge_text_or", "\\text{or} with TeX spaces"),
    ("«R»\n\nThe answer is $\\boxed{«A»\\text{ (maybe } «B» \\text{)}}$.", "hedge_paren",
     "'(maybe ...)' inside the box"),
    ("«R»\n\n$\\boxed{«A»/«B»}$ «U»", "hedge_slash", "slash alternatives of two whole answers"),
]
RETRACT_DEV = [
    ("«R»\n\n$\\boxed{«B»}$\n\nWait, no — I mis-added. It is «A».", "retraction",
     "box then 'wait, no ... it is' with another value"),
    ("«R»\n\nThe answer is $\\boxed{«B»}$. Actually, that's wrong; the correct answer should be «A» instead.",
     "retraction", "box then 'actually that's wrong'"),
]
RETRACT_HELD = [
    ("«R»\n\n\\boxed{«B»}\n\nHmm, let me reconsider. No, scratch that — the answer is «A».", "retraction",
     "'scratch that' after the box"),
]
CONFIRM_DEV = [
    ("«R»\n\n$\\boxed{«A»}$\n\nWait, let me double-check: yes, the computation holds, so the answer stays "
     "«A».", "same_value_twice", "re-check after the box confirms the same value"),
    ("«R» So the answer is $\\boxed{«A»}$.\n\n**Final Answer**\n$\\boxed{«A»}$", "same_value_twice",
     "same value boxed twice"),
]
CONFIRM_HELD = [
    ("<think>\n«R» So \\boxed{«A»}.\n</think>\n\nThe answer is $\\boxed{«A»}$.", "same_value_twice",
     "boxed in the thinking and again in the answer"),
]

# Number forms of 3600-like answers: (how the number is shown, rule, reason). «A» is the plain digits.
def number_forms(value: str) -> list[tuple[str, str, str]]:
    n = int(value)
    head, tail = value[:-3], value[-3:]
    forms = [
        (f"{head}\\,{tail}", "number_thin_space", "LaTeX thin space as thousands separator"),
        (f"{head}{{,}}{tail}", "number_brace_comma", "{,} thousands separator"),
        (f"{head} {tail}", "number_space", "plain space as thousands separator"),
        (f"{head},{tail}", "number_comma", "comma thousands separator"),
        (f"{value}.0", "number_decimal", "trailing .0"),
        (f"{n / 1000:g}e3", "number_sci", "scientific e-notation"),
        (f"{n / 1000:g} \\times 10^3", "number_sci", "× 10^3 notation"),
        (value.translate(str.maketrans("0123456789", "０１２３４５６７８９")), "number_unicode",
         "full-width digits"),
        (value.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")), "number_unicode", "Arabic-Indic digits"),
        (f"{head}\u202f{tail}", "number_unicode", "narrow no-break space separator"),
    ]
    return forms


def box_rows(rows: Rows, problems, styles, hedges, retracts, confirms, rng: random.Random) -> None:
    for q, reasoning, gold, wrong, unit in problems:
        prompt = BOX_PROMPT.format(q=q)
        chosen = rng.sample(styles, 3)
        for template, rule, phrase in chosen[:2]:
            rows.add("boxed_math", prompt, fill(template, gold, R=reasoning, U=unit), gold, ACCEPT,
                     f"correct value {gold}; {phrase} (a reader accepts)", rule)
        template, rule, phrase = chosen[2]
        rows.add("boxed_math", prompt, fill(template, wrong, R=reasoning.rsplit("\n", 1)[0], U=unit), gold, WRONG,
                 f"boxes {wrong}, gold is {gold}; {phrase}", "wrong_answer")
        template, rule, phrase = rng.choice(hedges)
        ambiguous = rule == "hedge_slash"  # 72/24 also reads as a fraction: no rule settles it
        rows.add("boxed_math", prompt, fill(template, gold, B=wrong, R=reasoning, U=unit), gold, REJECT,
                 f"hedge: {phrase} ({gold} vs {wrong}); a reader credits no hedge", rule, ambiguous=ambiguous)
    for q, reasoning, gold, wrong, unit in problems[::3]:
        template, rule, phrase = rng.choice(retracts)
        rows.add("boxed_math", BOX_PROMPT.format(q=q), fill(template, gold, B=wrong, R=reasoning, U=unit), gold,
                 MALFORMED_RIGHT, f"retraction: {phrase}; the boxed {wrong} is withdrawn, the correct {gold} is "
                 "never boxed", rule)
        rows.add("boxed_math", BOX_PROMPT.format(q=q), fill(template, wrong, B=gold, R=reasoning, U=unit), gold,
                 REJECT, f"retraction: {phrase}; boxes the gold {gold} then withdraws it for {wrong}", rule)
    for q, reasoning, gold, _wrong, unit in problems[1::3]:
        template, rule, phrase = rng.choice(confirms)
        rows.add("boxed_math", BOX_PROMPT.format(q=q), fill(template, gold, R=reasoning, U=unit), gold, ACCEPT,
                 f"{phrase} ({gold}); not a hedge", rule)
    for q, reasoning, gold, _wrong, unit in problems[2::4]:
        rows.add("boxed_math", BOX_PROMPT.format(q=q), f"{reasoning}\n\nSo the answer is {gold} {unit}.", gold,
                 MALFORMED_RIGHT, f"correct {gold} but never boxed though the prompt asks for a box", "no_box")
        cut = reasoning[: max(12, len(reasoning) // 2)]
        rows.add("boxed_math", BOX_PROMPT.format(q=q), cut, gold, REJECT,
                 "truncated mid-reasoning: no final answer", "truncated")


def number_rows(rows: Rows, problems, rng: random.Random, keep: slice) -> None:
    big = [p for p in problems if len(p[2]) >= 4]
    for q, reasoning, gold, _wrong, unit in big:
        prompt = BOX_PROMPT.format(q=q)
        forms = number_forms(gold)[keep]
        if unit == "dollars":
            forms.append((f"\\${gold[:-3]},{gold[-3:]}", "units", "a dollar sign and a comma"))
        for shown, rule, phrase in forms:
            template = rng.choice(["«R»\n\nThe final answer is $\\boxed{«A»}$.", "«R»\n\n\\[\\boxed{«A»}\\]",
                                   "«R»\n\nSo the total is \\(\\boxed{«A»}\\) «U»."])
            rows.add("boxed_math", prompt, fill(template, shown, R=reasoning, U=unit), gold, ACCEPT,
                     f"{shown} is {gold} written with {phrase}", rule)
        shown = f"{gold[:-3]}\\,{int(gold[-3:]) + 100:03d}" if int(gold[-3:]) < 900 else f"{gold[:-3]}\\,000"
        rows.add("boxed_math", prompt, f"{reasoning}\n\nThe final answer is $\\boxed{{{shown}}}$.", gold, WRONG,
                 f"{shown} is a different number from {gold} (thin space does not make it equal)",
                 "number_thin_space")


def math_rows(rows: Rows, problems, styles, rng: random.Random) -> None:
    styles = [s for s in styles if "«U»" not in s[0]]  # no unit noun after a symbolic answer
    for q, gold, goods, misses, rule in problems:
        prompt = BOX_PROMPT.format(q=q)
        reasoning = "Working through the algebra carefully gives the expression below."
        for good in goods:
            template, _, phrase = rng.choice(styles)
            rows.add("boxed_math", prompt, fill(template, good, R=reasoning, U=""), gold, ACCEPT,
                     f"{good} is {gold} written another way; {phrase}", rule)
        for miss, why in misses:
            template, _, phrase = rng.choice(styles)
            rows.add("boxed_math", prompt, fill(template, miss, R=reasoning, U=""), gold, WRONG,
                     f"{miss} against gold {gold}: {why}", rule)


def tag_rows(rows: Rows, problems, styles, rng: random.Random, hedge: str, second: str) -> None:
    for q, reasoning, gold, _wrong, _unit in problems:
        prompt = TAG_PROMPT.format(q=q)
        template, rule, phrase = rng.choice(styles)
        rows.add("answer_tag_math", prompt, fill(template, gold, R=reasoning), gold, ACCEPT,
                 f"correct {gold}; {phrase}", rule)
    for q, reasoning, gold, wrong, _unit in problems[::2]:
        prompt = TAG_PROMPT.format(q=q)
        template, rule, phrase = rng.choice(styles)
        rows.add("answer_tag_math", prompt, fill(template, wrong, R=reasoning), gold, WRONG,
                 f"answers {wrong}, gold is {gold}", "wrong_answer")
        rows.add("answer_tag_math", prompt, f"<think>\n{reasoning}\n</think>\n<answer>{fill(hedge, gold, B=wrong)}</answer>",
                 gold, REJECT, f"hedge '{fill(hedge, gold, B=wrong)}' inside the answer tag", "hedge_text_or")
        rows.add("answer_tag_math", prompt, f"<think>\n{reasoning}\n</think>\n<answer>{wrong}</answer>\n{second}"
                 f"<answer>{gold}</answer>", gold, REJECT,
                 f"two answer tags with different values ({wrong}, {gold})", "hedge_multi_box")
    for q, reasoning, gold, _wrong, _unit in problems[1::3]:
        prompt = TAG_PROMPT.format(q=q)
        rows.add("answer_tag_math", prompt, f"<think>\n{reasoning}\n</think>\n<answer>{gold}", gold, REJECT,
                 "answer tag never closed (truncated at the length cap)", "truncated")
        rows.add("answer_tag_math", prompt, f"{reasoning}\nThe answer is {gold}.", gold, MALFORMED_RIGHT,
                 f"correct {gold} but no answer tags", "no_tag")


def hash_rows(rows: Rows, problems, styles, rng: random.Random) -> None:
    for q, reasoning, gold, _wrong, unit in problems:
        prompt = HASH_PROMPT.format(q=q)
        template, rule, phrase = rng.choice(styles)
        shown = f"{int(gold):,}" if len(gold) >= 4 else gold
        rows.add("gsm8k_hash", prompt, fill(template, shown, R=reasoning, U=unit), gold, ACCEPT,
                 f"{shown} equals gold {gold}; {phrase}", "number_comma" if shown != gold else rule)
    for q, reasoning, gold, wrong, _unit in problems[::2]:
        prompt = HASH_PROMPT.format(q=q)
        rows.add("gsm8k_hash", prompt, f"{reasoning}\n#### {wrong}", gold, WRONG,
                 f"#### {wrong}, gold is {gold}", "wrong_answer")
        rows.add("gsm8k_hash", prompt, f"{reasoning}\n#### {gold} or {wrong}", gold, REJECT,
                 f"hedge '{gold} or {wrong}' on the #### line", "hedge_text_or")
        rows.add("gsm8k_hash", prompt, f"{reasoning}\nThe answer is {gold}.", gold, MALFORMED_RIGHT,
                 f"correct {gold} but no #### line", "no_hash")
    for q, reasoning, gold, wrong, unit in problems[1::2]:
        prompt = HASH_PROMPT.format(q=q)
        rows.add("gsm8k_hash", prompt, f"{reasoning}\n#### ${gold}" if unit == "dollars" else
                 f"{reasoning}\n#### {gold} {unit}", gold, ACCEPT,
                 f"{gold} with its unit on the #### line (a unit is not a hedge)", "units")
        rows.add("gsm8k_hash", prompt, f"{reasoning}\n#### {wrong}\n\nWait, that is wrong. #### {gold}", gold,
                 REJECT, f"two #### lines with different values ({wrong}, {gold})", "hedge_multi_box")


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                    encoding="utf-8")


def build_dev() -> list[dict]:
    from corpus_handwritten import dev_rows  # hand-written tricky rows (same folder)

    rng, rows = random.Random(12), Rows("c")
    box_rows(rows, GSM_DEV, BOX_STYLES_DEV, HEDGES_DEV, RETRACT_DEV, CONFIRM_DEV, rng)
    number_rows(rows, GSM_DEV, rng, slice(None))
    math_rows(rows, MATH_DEV, BOX_STYLES_DEV, rng)
    tag_rows(rows, GSM_DEV, TAG_STYLES_DEV, rng, "«A» or «B»", "")
    hash_rows(rows, GSM_DEV, HASH_STYLES_DEV, rng)
    dev_rows(rows)
    return rows.rows


def build_heldout() -> list[dict]:
    from corpus_handwritten import held_rows

    rng, rows = random.Random(1215), Rows("h")
    box_rows(rows, GSM_HELD, BOX_STYLES_HELD, HEDGES_HELD, RETRACT_HELD, CONFIRM_HELD, rng)
    number_rows(rows, GSM_HELD, rng, slice(None, None, 2))
    math_rows(rows, MATH_HELD, BOX_STYLES_HELD, rng)
    tag_rows(rows, GSM_HELD, TAG_STYLES_HELD, rng, "«A» (possibly «B»)", "Let me reconsider.\n")
    hash_rows(rows, GSM_HELD, HASH_STYLES_HELD, rng)
    held_rows(rows)
    return rows.rows


def main() -> None:
    import sys

    sys.path.insert(0, str(HERE))
    write(HERE / "reward_corpus.jsonl", build_dev())
    write(HERE / "reward_heldout.jsonl", build_heldout())


if __name__ == "__main__":
    main()
