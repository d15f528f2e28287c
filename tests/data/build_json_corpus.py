"""Build tests/data/json_match_corpus.jsonl: invoice-field extraction answers written the way instruct models
answer, each labelled by a careful reader with a reason.

Deterministic: `python tests/data/build_json_corpus.py` rewrites the file byte for byte. Row format as
tests/data/README.md (`kind` json_extract: the spec of `benchmarks/bench_json_reward.py`). Labels:

* ``correct``: every field names the gold VALUE (vendor however capitalised or accented, a total written as
  the string "1,234.50", a date in the invoice's own format), nothing is missing, no key or value is invented,
  and there is one answer object after any ``<think>`` block.
* ``well_formed``: that object is strict JSON (json.loads accepts it) in the task's shape — total a number,
  date ISO ``YYYY-MM-DD``, currency an upper-case ISO code, invoice number in the gold's form, no other key.
* ``accept`` = both (what the gate compares with the format + correctness rewards).
"""

from __future__ import annotations

import datetime
import json
import random
import unicodedata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "json_match_corpus.jsonl"
PROMPT = ("Extract the invoice fields vendor, date (YYYY-MM-DD), total (a number), currency (ISO code) and "
          "invoice_number from this OCR text. Answer with a JSON object.\n\n{ocr}")

# (gold, OCR text as the invoice prints it, the source-format date, the currency symbol, a wrong vendor)
INVOICES: list[tuple[dict[str, Any], str, str, str, str]] = [
    ({"vendor": "Müller GmbH", "date": "2024-03-15", "total": 1234.5, "currency": "EUR",
      "invoice_number": "INV-2024-0042"}, "MÜLLER GMBH  Rechnung Nr. INV-2024-0042  Datum 15.03.2024  "
     "Gesamt 1.234,50 EUR", "15.03.2024", "€", "Schmidt AG"),
    ({"vendor": "Acme Corp", "date": "2023-11-02", "total": 89.99, "currency": "USD",
      "invoice_number": "A-10293"}, "ACME CORP. Invoice A-10293 Date: Nov 2, 2023 Amount due $89.99",
     "Nov 2, 2023", "$", "Acme Supplies"),
    ({"vendor": "Café de Flore", "date": "2024-01-07", "total": 46.8, "currency": "EUR",
      "invoice_number": "F240107-18"}, "CAFE DE FLORE 172 bd St-Germain Facture F240107-18 07/01/2024 "
     "TOTAL TTC 46,80 €", "07/01/2024", "€", "Les Deux Magots"),
    ({"vendor": "Northwind Traders", "date": "2022-06-30", "total": 15000.0, "currency": "GBP",
      "invoice_number": "NW-7781"}, "Northwind Traders Ltd  INVOICE NW-7781  30 June 2022  Total £15,000.00",
     "30 June 2022", "£", "Southwind Traders"),
    ({"vendor": "Tanaka Shoji", "date": "2024-08-19", "total": 52800, "currency": "JPY",
      "invoice_number": "TS-240819-003"}, "TANAKA SHOJI K.K. 請求書 TS-240819-003 2024/08/19 合計 ¥52,800",
     "2024/08/19", "¥", "Sato Trading"),
    ({"vendor": "Smith & Sons", "date": "2021-12-24", "total": 310.0, "currency": "CAD",
      "invoice_number": "000451"}, "SMITH & SONS plumbing  Inv #000451  Dec 24, 2021  Balance CAD 310.00",
     "December 24, 2021", "$", "Smith Brothers"),
    ({"vendor": "Zürcher Druck AG", "date": "2023-05-09", "total": 2750.35, "currency": "CHF",
      "invoice_number": "ZD-2023-118"}, "Zürcher Druck AG  Rechnung ZD-2023-118  9. Mai 2023  Total CHF 2'750.35",
     "09.05.2023", "Fr.", "Basler Druck AG"),
    ({"vendor": "Blue Ocean Logistics", "date": "2024-02-29", "total": 7420.0, "currency": "USD",
      "invoice_number": "BOL/2024/0229"}, "BLUE OCEAN LOGISTICS INC. Invoice BOL/2024/0229 02/29/2024 "
     "Total USD 7,420.00", "02/29/2024", "$", "Red Ocean Shipping"),
    ({"vendor": "Nordic Wood Oy", "date": "2023-09-01", "total": 980.4, "currency": "EUR",
      "invoice_number": None}, "NORDIC WOOD OY  Lasku  1.9.2023  Yhteensä 980,40 €  (no invoice number)",
     "1.9.2023", "€", "Baltic Wood"),
    ({"vendor": "São Paulo Têxtil Ltda", "date": "2024-04-10", "total": 1999.9, "currency": "BRL",
      "invoice_number": "NF-55821"}, "SAO PAULO TEXTIL LTDA  Nota Fiscal NF-55821  10/04/2024  Total R$ 1.999,90",
     "10/04/2024", "R$", "Rio Têxtil Ltda"),
]

LEADS = ["Here is the extracted information in JSON format:", "Here are the extracted invoice fields:",
         "Sure! Here's the JSON:", "```", "The extracted data is shown below.", ""]
TAILS = ["", "Let me know if you need anything else.", "Note: the total includes VAT.",
         "I normalised the date to ISO format as requested."]

Row = tuple[str, tuple[bool, bool], str]  # completion, (correct, well_formed), reason


def _dump(obj: dict[str, Any], indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, ensure_ascii=False)


def _fenced(obj_text: str, rng: random.Random) -> str:
    lead = rng.choice([x for x in LEADS if x != "```"])
    tail = rng.choice(TAILS)
    return "\n\n".join(p for p in (lead, f"```json\n{obj_text}\n```", tail) if p)


def _with(gold: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(gold)
    for key, value in changes.items():
        if value is _DROP:
            out.pop(key, None)
        else:
            out[key] = value
    return out


_DROP = object()


def _other_day(iso: str) -> str:
    return (datetime.date.fromisoformat(iso) + datetime.timedelta(days=1)).isoformat()


def styles(gold: dict[str, Any], src_date: str, symbol: str, other_vendor: str,
           rng: random.Random) -> list[tuple[str, Row]]:
    """(rule, row) for every style, built from one invoice's gold."""
    g = gold
    total_str = f"{g['total']:,.2f}"
    think = (f"<think>\nThe OCR shows the vendor {g['vendor']} and the total {total_str}. I will write the JSON.\n"
             f"</think>\n\n")
    upper = g["vendor"].upper()
    rows: list[tuple[str, Row]] = [
        ("fenced_sentence", (_fenced(_dump(g), rng), (True, True), "fenced ```json object after a lead sentence")),
        ("bare", (_dump(g, None), (True, True), "bare JSON object, nothing else")),
        ("after_prose", (f"Extracted fields: {_dump(g, None)}", (True, True), "object after a sentence on the "
                         "same line")),
        ("prose_after", (f"{_dump(g)}\n\n{rng.choice(TAILS[1:])}", (True, True), "object followed by a remark")),
        ("plain_fence", (f"```\n{_dump(g)}\n```", (True, True), "fence without a language tag")),
        ("key_order", (_dump(dict(reversed(list(g.items())))), (True, True), "keys in another order")),
        ("vendor_case", (_dump(_with(g, vendor=upper)), (True, True), "vendor in capitals as the OCR prints it: "
                         "the same vendor")),
        ("vendor_period", (_dump(_with(g, vendor=g["vendor"] + ".")), (True, True), "vendor with a final period")),
        ("think_then_answer", (think + _fenced(_dump(g), rng), (True, True), "reasoning in <think>, then the "
                               "fenced answer")),
        ("trailing_comma", (_dump(g)[:-2] + ",\n}", (True, False), "trailing comma: values right, json.loads "
                            "refuses it")),
        ("total_string", (_dump(_with(g, total=total_str)), (True, False), "total as the string "
                          f"\"{total_str}\": right value, not a number")),
        ("source_date", (_dump(_with(g, date=src_date)), (True, False), f"date as the invoice prints it "
                         f"({src_date}): right day, not ISO")),
        ("currency_lower", (_dump(_with(g, currency=g["currency"].lower())), (True, False), "currency code in "
                            "lower case: the code, not its form")),
        ("missing_field", (_dump(_with(g, date=_DROP)), (False, False), "date missing")),
        ("extra_field", (_dump(_with(g, tax_rate=0.19, vendor_address="Hauptstr. 1")), (False, False),
                         "hallucinated fields tax_rate / vendor_address")),
        ("wrapped_answer", (_dump({"reasoning": "Read from the OCR text.", "answer": g}), (False, False),
                            "the fields wrapped in {reasoning, answer}: not the task's object")),
        ("truncated", (_dump(g)[: len(_dump(g)) * 2 // 3], (False, False), "output cut mid-object")),
        ("truncated_fence", ("```json\n" + _dump(g)[: len(_dump(g)) // 2], (False, False),
                             "fence opened, object cut")),
        ("think_refusal", (f"<think>\n```json\n{_dump(g)}\n```\n</think>\n\nI'm sorry, but I can't help with "
                           "extracting data from this document.", (False, False),
                           "the JSON is only in the reasoning; the answer is a refusal")),
        ("unclosed_think", (f"<think>\nLet me read the invoice. {_dump(g, None)}", (False, False),
                            "stopped inside <think>: no answer")),
        ("wrong_total", (_dump(_with(g, total=round(float(g["total"]) * 1.1 + 1, 2))), (False, True),
                         "total wrong (VAT added again)")),
        ("wrong_date", (_dump(_with(g, date=_other_day(g["date"]))), (False, True), "another day")),
        ("wrong_vendor", (_dump(_with(g, vendor=other_vendor)), (False, True), "another company named")),
        ("currency_symbol", (_dump(_with(g, currency=symbol)), (False, False), f"currency as the symbol "
                             f"{symbol}: not the ISO code ($ is USD, CAD, AUD...)")),
        ("two_objects", (f"First pass: {_dump(_with(g, total=0), None)}\nCorrected: {_dump(g, None)}",
                         (False, False), "two different objects: a hedge, a parser takes either")),
        ("markdown_table", ("| field | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in g.items()),
                            (False, False), "a table, no JSON")),
    ]
    plain = unicodedata.normalize("NFKD", g["vendor"]).encode("ascii", "ignore").decode()
    if plain != g["vendor"]:
        rows.append(("vendor_accents", (_dump(_with(g, vendor=plain)), (True, True),
                                        "vendor without its accents (as OCR reads it): the same vendor")))
    if g["invoice_number"] is None:
        rows += [("null_omitted", (_dump(_with(g, invoice_number=_DROP)), (True, True),
                                   "gold invoice number is null: leaving it out is right")),
                 ("null_invented", (_dump(_with(g, invoice_number="NW-2023-0901")), (False, True),
                                    "an invoice number invented where the invoice has none"))]
    else:
        rows += [("number_rounding", (_dump(_with(g, total=float(g["total"]) + 0.004)), (True, True),
                                      "total off by 0.004 (within the cent tolerance)"))]
    return rows


M = INVOICES[0][0]
_M = json.dumps(M, indent=2, ensure_ascii=False)
_M_ALT = json.dumps({**M, "date": "03/15/2024"}, ensure_ascii=False)
# Rows written by hand in shapes the generator does not make (invoice 0): (rule, completion, (correct,
# well_formed), reason, ambiguous).
HANDWRITTEN: list[tuple[str, str, tuple[bool, bool], str, bool]] = [
    ("fence_upper_lang", f"``` JSON\n{_M}\n```", (True, True), "fence language written JSON", False),
    ("bold_lead", f"**Extracted Data:**\n\n```json\n{_M}\n```", (True, True), "Llama-style bold lead", False),
    ("answer_tags", f"<answer>\n{_M}\n</answer>", (True, True), "object inside <answer> tags", False),
    ("json_comment", _M.replace('"total": 1234.5,', '"total": 1234.5,  // incl. 19% VAT'), (True, False),
     "a // comment: values right, not JSON", False),
    ("total_european", _M.replace("1234.5", '"1.234,50"'), (True, False),
     "total as the invoice prints it (1.234,50): right value, a string", False),
    ("total_currency_str", _M.replace("1234.5", '"€1,234.50"'), (True, False), "total with its symbol, a string",
     False),
    ("date_single_digit", _M.replace("2024-03-15", "2024-3-15"), (True, False), "ISO-like date without "
     "zero padding: right day, not YYYY-MM-DD", False),
    ("date_with_time", _M.replace("2024-03-15", "2024-03-15T00:00:00"), (True, False), "a timestamp: right day, "
     "not a date", False),
    ("total_two_decimals", _M.replace("1234.5", "1234.50"), (True, True), "1234.50 is the number 1234.5", False),
    ("array_wrapped", f"[{_M}]", (True, False), "the object inside a list: values right, not an object", False),
    ("alternative_object", f"```json\n{_M}\n```\n\nIf you need the US date format instead:\n```json\n{_M_ALT}\n"
     "```", (False, False), "two different objects offered: a hedge", False),
    ("same_object_twice", f"```json\n{_M}\n```\nSo the final answer is:\n```json\n{_M}\n```", (True, True),
     "the same object twice", False),
    ("vendor_transliterated", _M.replace("Müller", "Mueller"), (True, True), "ü written ue: the same vendor to a "
     "German reader, another string to a matcher", True),
    ("vendor_short", _M.replace("Müller GmbH", "Müller"), (False, True), "legal form dropped: another string "
     "(Müller AG would be another company)", False),
    ("nested_total", _M.replace('"total": 1234.5,', '"total": {"amount": 1234.5},'), (False, False),
     "total nested in an object", False),
    ("python_dict", "{'vendor': 'Müller GmbH', 'date': '2024-03-15', 'total': 1234.5, 'currency': 'EUR', "
     "'invoice_number': 'INV-2024-0042'}", (False, False), "a Python dict repr, not JSON (single quotes)", True),
    ("empty_object", "```json\n{}\n```", (False, False), "empty object", False),
    ("only_prose", "The vendor is Müller GmbH, dated 15 March 2024, total 1,234.50 EUR, invoice INV-2024-0042.",
     (False, False), "prose, no JSON", False),
    ("null_everything", json.dumps({k: None for k in M}), (False, True), "every field null", False),
    ("think_prefilled", f"The OCR text names the vendor in capitals.\n</think>\n\n```json\n{_M}\n```",
     (True, True), "pre-filled <think> (the completion starts inside it), answer after </think>", False),
    ("think_draft_then_wrong", f"<think>\n{_M}\n</think>\n\n" + _M.replace("1234.5", "1324.5"), (False, True),
     "right object in the reasoning, a wrong total in the answer", False),
    ("refusal_only", "I'm sorry, but I can't help with that request.", (False, False), "refusal", False),
]


def build() -> list[dict[str, Any]]:
    rng = random.Random(29)
    out: list[dict[str, Any]] = []
    for number, (gold, ocr, src_date, symbol, other_vendor) in enumerate(INVOICES):
        for rule, (completion, (correct, well_formed), reason) in styles(gold, src_date, symbol, other_vendor, rng):
            out.append({"ambiguous": False, "columns": {"gold": gold}, "completion": completion, "gold": gold,
                        "id": f"j{len(out) + 1:04d}", "kind": "json_extract",
                        "label": {"accept": correct and well_formed, "correct": correct, "well_formed": well_formed},
                        "prompt": PROMPT.format(ocr=ocr), "reason": reason, "rule": rule, "invoice": number})
    gold, ocr = INVOICES[0][0], INVOICES[0][1]
    for rule, completion, (correct, well_formed), reason, ambiguous in HANDWRITTEN:
        out.append({"ambiguous": ambiguous, "columns": {"gold": gold}, "completion": completion, "gold": gold,
                    "id": f"j{len(out) + 1:04d}", "kind": "json_extract",
                    "label": {"accept": correct and well_formed, "correct": correct, "well_formed": well_formed},
                    "prompt": PROMPT.format(ocr=ocr), "reason": reason, "rule": rule, "invoice": 0})
    return out


def write(rows: list[dict[str, Any]], path: Path = OUT) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    rows = build()
    write(rows)
    print(f"{len(rows)} rows -> {OUT}")
