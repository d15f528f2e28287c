"""A readable run-directory name from the task as users write it: the model's family and size, then the task's key
words (a dataset it names, its subject, the output format), at most 40 characters, never cut inside a word."""

from __future__ import annotations

import json
import re

import pytest

from finetune.slug import MAX_LEN, model_part, propose

CASES = [  # (what the user typed, --model or None, the name proposed, why)
    ("fine-tune Qwen2.5-1.5B-Instruct to extract invoice fields (vendor, date, total, currency, invoice_number) "
     "from OCR text into JSON; 2,000 labelled examples; one A100 80GB", None, "qwen2.5-1.5b-invoice-json",
     "the model named in the task; the field list, verbs and hardware dropped; the format last"),
    ("Train meta-llama/Llama-3.1-8B-Instruct to solve GSM8K math word problems with step-by-step reasoning", None,
     "llama-3.1-8b-gsm8k-math", "organisation and -Instruct dropped; the dataset name first"),
    ("fine-tune Qwen2.5-Coder-7B-Instruct to write Python functions that pass MBPP unit tests", None,
     "qwen2.5-coder-7b-mbpp-python", "a dataset without digits (MBPP) is known; generic nouns dropped"),
    ("make mistral-7b-instruct-v0.3 answer SQL queries over our sales database", None, "mistral-7b-sales-sql",
     "the version after the size dropped"),
    ("classify customer support tickets by urgency", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b-customer-support",
     "the model from --model when the task names none"),
    ("Fine-tune Phi-3-mini-4k-instruct to answer chemistry exam questions in LaTeX", None,
     "phi-3-mini-chemistry-latex", "a model without a size in its name; the context length dropped"),
    ("summarise legal contracts", None, "legal-contracts", "no model: the key words alone"),
    ("fine-tune deepseek-ai/DeepSeek-R1-Distill-Qwen-14B for competition mathematics (AIME 2024 problems)", None,
     "deepseek-r1-distill-qwen-14b-aime", "over 40 characters with the subject: whole words dropped from the end"),
]


@pytest.mark.parametrize("task,model,expected,why", CASES, ids=[c[2] for c in CASES])
def test_a_readable_slug_for_a_realistic_task(task, model, expected, why):
    slug = propose(task, model)
    assert slug == expected, why
    assert len(slug) <= MAX_LEN and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", slug)
    assert "fine-tune" not in slug and not slug.endswith("-to")


def test_the_model_part_is_family_and_size():
    assert model_part("Qwen/Qwen2.5-1.5B-Instruct") == "qwen2.5-1.5b"
    assert model_part("mistralai/Mixtral-8x7B-Instruct-v0.1") == "mixtral-8x7b"
    assert model_part("HuggingFaceTB/SmolLM2-135M-Instruct") == "smollm2-135m"
    assert model_part("./checkpoints/my-sft/") == "my-sft"


def test_status_proposes_the_slug(cli, tmp_path):
    task = "fine-tune Qwen2.5-1.5B-Instruct to extract invoice fields from OCR text into JSON"
    r = cli("status", "--task", task)
    assert r.code == 0 and r.out.strip() == ("slug: qwen2.5-1.5b-invoice-json (proposed run directory: "
                                             "runs/qwen2.5-1.5b-invoice-json)")
    r = cli("status", tmp_path / "runs" / "new", "--task", task)  # a new run: the slug, then where it starts
    assert r.code == 0 and r.out.startswith("slug: qwen2.5-1.5b-invoice-json") and "resume: Phase 0" in r.out
    r = cli("status", "--task", task, "--json")
    assert json.loads(r.out) == {"slug": "qwen2.5-1.5b-invoice-json"}
    for argv in (("status",), ("status", "--task", " "), ("status", tmp_path, "--model", "x")):
        r = cli(*argv)
        assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, (argv, r)
