"""A readable run-directory name from the model and the task: ``qwen2.5-1.5b-invoice-json``.

The model's family and size (the hub id's last part up to its size, without the organisation or `-Instruct`),
then the task's key words: a dataset name it mentions (GSM8K, MBPP), its subject, and the output format (JSON, SQL,
Python). Framing verbs ("fine-tune", "extract"), function words and generic nouns ("fields", "text") are dropped;
a parenthesised list (the field names) is skipped. At most ``MAX_LEN`` characters, never cut inside a word.
"""

from __future__ import annotations

import re

MAX_LEN = 40
SIZE = re.compile(r"^(\d+x)?\d+(\.\d+)?[bm]$")  # 1.5b, 7b, 8x7b, 135m
FAMILIES = r"(?:qwen|llama|gemma|mistral|mixtral|phi|smollm|deepseek|olmo|granite|falcon|pythia|gpt)"
MODEL_IN_TEXT = re.compile(r"(?:[a-z0-9_.-]+/)?(?:[a-z][a-z0-9.]*(?:[-_][a-z0-9.]+)*?[-_](?:\d+x)?\d+(?:\.\d+)?[bm]"
                           rf"|{FAMILIES}[a-z0-9.]*(?=[-_]))(?:[-_][a-z0-9.]+)*")
MODEL_NOISE = {"instruct", "chat", "it", "base", "hf", "meta", "gguf", "awq", "gptq"}
FORMATS = ("json", "sql", "python", "yaml", "xml", "csv", "latex", "regex", "markdown")
DATASETS = {"mbpp", "humaneval", "squad", "apps", "aime", "svamp", "hotpotqa", "triviaqa", "mmlu"}
STOP = set("""
a an the and or of to in into from for with by on at as over under about via than that which who whose this these
those it its our their my your is are be being was were will would should can could must may might do does
fine-tune finetune fine tune tuned tuning train trained training teach make get let turn use using learn improve
extract extracts extracting extraction answer answers answering solve solving solves write writes writing
generate generating produce producing return returns returning output outputs classify classifying
pull convert converting parse parsing read reading fill label labelled labeled grade graded check checked
pass passes passing give gives call calls calling predict map follow summarise summarize translate rewrite
function functions query queries program programs solution solutions code snippet
model models llm policy task tasks field fields text texts data dataset datasets example examples sample
samples document documents input inputs response responses question questions problem problems item items
step steps value values result results format formatted structured object objects string strings
unit tests test word words thing things way ways one two three new each every all some any
k examples gpu gpus a100 h100 h200 80gb 40gb box machine
""".split())


def model_part(model: str) -> str:
    """``Qwen/Qwen2.5-1.5B-Instruct`` → ``qwen2.5-1.5b``; ``meta-llama/Llama-3.1-8B-Instruct`` → ``llama-3.1-8b``."""
    name = model.strip().rstrip("/").split("/")[-1].lower()
    tokens = [t for t in re.split(r"[-_\s]+", name) if t and t not in MODEL_NOISE]
    for i, t in enumerate(tokens):
        if SIZE.match(t):
            return "-".join(tokens[: i + 1])
    kept = [t for t in tokens if not re.fullmatch(r"v\d+(\.\d+)*|\d+k", t)]  # versions, context lengths
    return "-".join(kept[:3])


def key_words(task: str, model: str | None = None) -> list[str]:
    """The task's key words: a dataset name, then the subject, then the output format (at most three)."""
    text = task.lower()
    if model:
        text = text.replace(model.lower(), " ")
    text = MODEL_IN_TEXT.sub(" ", text)
    text = re.sub(r"\([^)]*,[^)]*\)", " ", text)  # a listed set of fields, options...
    words = [w.strip(".") for w in re.findall(r"[a-z0-9][a-z0-9.'-]*", text)]
    words = [w for part in words for w in re.split(r"[-']", part) if w]
    seen: list[str] = []
    for w in words:
        if w not in seen and w not in STOP and len(w) > 1 and not re.fullmatch(r"\d+[km]?", w):
            seen.append(w)
    datasets = [w for w in seen if w in DATASETS or (re.search(r"[a-z]", w) and re.search(r"\d", w))]
    formats = [w for w in seen if w in FORMATS]
    rest = [w for w in seen if w not in datasets and w not in formats]
    subject = rest[:1] if datasets or formats else rest[:2]
    return datasets[:1] + subject + formats[:1]


def propose(task: str, model: str | None = None) -> str:
    """The run directory's name for ``task`` on ``model`` (the model named in the task when none is given)."""
    named = model or _model_in(task)
    parts = ([model_part(named)] if named else []) + key_words(task, named)
    parts = [re.sub(r"[^a-z0-9.]+", "-", p).strip("-.") for p in parts]
    parts = [p for p in parts if p]
    while len(parts) > 1 and len("-".join(parts)) > MAX_LEN:
        parts.pop()  # whole words go, from the end (the format before the subject, never half a word)
    slug = "-".join(parts)[:MAX_LEN].rstrip("-.") if parts else ""
    return slug or "run"


def _model_in(task: str) -> str | None:
    found = MODEL_IN_TEXT.search(task.lower())
    return found.group(0) if found else None
