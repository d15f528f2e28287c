"""An agent's walk through commands/finetune.md on a structured-output task, from an empty folder to a PASS gate
and a rendered config, on a machine without a GPU (the import path).

The task: extract invoice fields as JSON (`type: json_match`, format role + correctness). The test acts as the
agent: it runs the command file's own lines (parsed by tests/test_finetune_command.py's parser, with its
substitutions) in the file's order, writes what the file says the agent writes (answers.yaml, spec.yaml,
reading.jsonl), and at every step checks that the next step the plugin prints is the line the command file
runs next. The completions "sampled on the GPU machine" are the labelled invoice answers of
tests/data/build_json_corpus.py (the styles instruct models write), and both readings are that corpus's careful
labels. It also plays two people, explicitly: the user who runs `sample_vllm.py` on their GPU box, and the user
who reads the HTML page and approves `inspect human-verdict` (the one step the command does not pre-approve).
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from test_finetune_command import Invocation, _argv, _bash, _command, _plugin_data, _substitute, _verb

ROOT = Path(__file__).resolve().parents[1]
TASK = ("fine-tune Qwen2.5-1.5B-Instruct to extract invoice fields (vendor, date, total, currency, invoice_number) "
        "from OCR text into JSON; 2,000 labelled examples; one A100 80GB")  # what the user typed after /finetune
SLUG = "qwen2.5-1.5b-invoice-json"  # the name `finetune status --task` proposes for it
FIELDS = {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01}, "currency": "code",
          "invoice_number": "code"}
USER = "Test User"


def _corpus():
    spec = importlib.util.spec_from_file_location("build_json_corpus", ROOT / "tests" / "data" / "build_json_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _line(calls: list[Invocation], verb: str, has: str = "", conditional: bool = False) -> Invocation:
    """The command file's Phase 0-2 line for ``verb`` (the first one containing ``has``)."""
    found = [c for c in calls if _verb(c.line) == verb and has in c.line and (c.condition is not None) == conditional
             and c.phase in ("(before Phase 0)", "Phase 0", "Phase 1", "Phase 2")]
    assert found, f"commands/finetune.md has no {verb!r} line with {has!r}"
    return found[0]


class Walk:
    """The agent at the keyboard: runs a command-file line in-process (``cli``) and reads what it printed."""

    def __init__(self, cli, data: Path, run_dir: Path, values: dict[str, str]):
        from finetune.invocation import runnable

        self.cli, self.data, self.run_dir, self.values = cli, data, run_dir, values
        self.prefix = runnable()  # how the plugin prints itself in a "next:" line
        self.ran: list[Invocation] = []

    def argv(self, call: Invocation) -> list[str]:
        argv = _argv(_substitute(call.line, self.data, self.run_dir), self.values)
        assert Path(argv[0]).name == "finetune", argv
        return argv[1:]

    def run(self, call: Invocation, code: int = 0) -> str:
        self.ran.append(call)
        result = self.cli(*self.argv(call))
        assert result.code == code, (call.line, result)
        return result.out

    def printed_next(self, out: str, lead: str) -> list[str]:
        """The finetune command printed after ``lead`` (its argv without the program)."""
        text = " ".join(out.split())  # a wide console, but join any wrap anyway
        assert lead in text, (lead, text[-2000:])
        rest = text.split(lead, 1)[1].strip()
        assert rest.startswith(self.prefix), (self.prefix, rest)
        return shlex.split(rest[len(self.prefix):].split(" (or ", 1)[0])

    def assert_next(self, out: str, lead: str, call: Invocation, *, prefix_only: bool = False) -> None:
        """The printed next step is the command file's ``call`` (or the start of it, when the file adds flags)."""
        printed, expected = self.printed_next(out, lead), self.argv(call)
        assert (expected[:len(printed)] if prefix_only else expected) == printed, (printed, expected)


def _empty_project(tmp: Path, corpus) -> tuple[Path, Path]:
    """The user's folder: nothing but their labelled invoices. The agent makes runs/<slug>/ and writes the files the
    command file says it writes with the user: answers.yaml (Phase 0) and, after `route`, spec.yaml."""
    project = tmp / "project"
    run_dir = project / "runs" / SLUG
    run_dir.mkdir(parents=True)
    rows = [{"prompt": corpus.PROMPT.format(ocr=ocr), "gold": gold} for gold, ocr, *_ in corpus.INVOICES]
    (run_dir / "data.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                        encoding="utf-8")
    return project, run_dir


def _write_spec(run_dir: Path, model: Path, fields: dict | None = None, held_back: int = 0) -> None:
    spec = {
        "name": SLUG, "model": str(model),
        "dataset": {"path": "data.jsonl", "prompt_column": "prompt", "answer_column": "gold"},
        "rewards": [
            {"name": "json_shape", "type": "json_match", "role": "format", "answer_column": "gold", "weight": 0.2,
             "fields": json.loads(json.dumps(FIELDS))},  # copies: a spec refuses YAML aliases
            {"name": "json_fields", "type": "json_match", "answer_column": "gold",
             "fields": json.loads(json.dumps(fields or FIELDS))}],
        "hardware": {"profile": "a100-80gb", "gpus": 1},
        "generation": {"max_completion_length": 256},
        "training": {"num_generations": 8},
        "inspection": {"prompts": 10, "per_prompt": 6, "min_read": 50, "probe_prompts": 2, "held_back_prompts": held_back,
                       "base_success": {"prompts": 10, "samples_per_prompt": 8}},
    }
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _sample_on_the_gpu_box(run_dir: Path, corpus) -> dict[str, dict]:
    """The user's part on their GPU machine, played by the test: `sample_vllm.py` writes one answer per request id
    (the row format of requests/sample_vllm.py); the answers are the corpus's, for the invoice each prompt shows.
    Returns the careful reader's label of each sample id."""
    pool: dict[int, list[dict]] = {}
    handwritten = {rule for rule, *_ in corpus.HANDWRITTEN}
    for row in corpus.build():
        if row["rule"] not in handwritten:
            pool.setdefault(row["invoice"], []).append(row)
    labels: dict[str, dict] = {}
    requests = run_dir / "requests"
    for source, target, shift in (("requests.jsonl", "samples.jsonl", 0), ("base_requests.jsonl",
                                                                           "base_samples.jsonl", 3)):
        out = []
        for line in (requests / source).read_text(encoding="utf-8").splitlines():
            req = json.loads(line)
            styles = pool[req["row"] % len(corpus.INVOICES)]  # a second phrasing of an invoice: the same answers
            for i, sid in enumerate(req["ids"]):
                answer = styles[(4 * i + req["row"] + shift) % len(styles)]  # a spread of styles per prompt
                labels[sid] = {**answer["label"], "note": answer["reason"]}
                out.append({"id": sid, "row": req["row"], "prompt": req["prompt"], "completion": answer["completion"],
                            "conversational": req["conversational"], "columns": req["columns"], "truncated": False,
                            "source": "vllm"})
        (requests / target).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out),
                                       encoding="utf-8")
    return labels


def _export(page: str, labels: dict[str, dict]) -> str:
    """verdicts.jsonl as the HTML page exports it (its verdictLines()): the person judged each sample before the
    page revealed its scores (first_verdict), bound to the digest of the sample the page showed."""
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))
    lines = []
    for item in data["items"]:
        judged = {k: labels[item["id"]][k] for k in ("accept", "correct", "well_formed")}
        lines.append({"id": item["id"], **judged, "note": labels[item["id"]]["note"], "reader": "human",
                      "time": "2026-01-01T00:00:00.000Z", "sample_sha256": item["sha"], "revealed": True,
                      "first_verdict": judged, "changed_after_reveal": False, "page": data["meta"]["page"]})
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)


@pytest.mark.slow
def test_agent_walks_an_extraction_task_from_an_empty_folder_to_a_rendered_config(cli, tiny_model_dir, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the printed next steps on one line each
    front, body, calls = _command()
    corpus = _corpus()
    project, run_dir = _empty_project(tmp_path, corpus)
    monkeypatch.chdir(project)
    data = _plugin_data(tmp_path)
    # the values the agent fills in: the spec's base-success temperature (its default), the user's name, and the
    # file the HTML page exports (into the project folder, where the user saves it)
    walk = Walk(cli, data, run_dir, {"BASE_TEMPERATURE": "0.3", "USER_NAME": USER,
                                     "EXPORTED_VERDICTS": "verdicts.jsonl"})
    status = _line(calls, "status")

    def resume(phase: str) -> str:
        out = walk.run(status)
        line = next(x for x in out.splitlines() if x.startswith("resume: "))
        assert line.startswith(f"resume: {phase}"), out
        return out

    # Before Phase 0: the bootstrap (a real bash run of the line), the run's name from the task the user typed, then
    # status on the new run directory
    boot = _bash(_substitute(_line(calls, "bootstrap").line, data, run_dir), {})
    assert boot.returncode == 0 and "up to date" in boot.stdout, boot.stdout + boot.stderr
    walk.values["TASK"] = TASK
    out = walk.run(_line(calls, "status", "--task", conditional=True))
    assert out.startswith(f"slug: {SLUG} (proposed run directory: runs/{SLUG})"), out
    assert run_dir.name == SLUG
    out = resume("Phase 0 - route (missing)")
    machine = next(x for x in out.splitlines() if x.startswith("machine: "))
    if "no CUDA GPU" in machine:  # (a CI box with a GPU still walks the import path: the user's box samples)
        assert "inspect sample --emit-requests" in machine, machine

    # Phase 0: the routing answers (2,000 labelled invoices: demonstrations exist), then route
    (run_dir / "answers.yaml").write_text(yaml.safe_dump({
        "verifiable": True, "signal_kind": "exact_match", "demonstrations": True, "preference_pairs": False,
        "human_judged": False, "base_success": "sometimes"}))
    out = walk.run(_line(calls, "route"))
    assert "route: grpo-rlvr-training" in out
    # the file: "when route also lists what to offer (demonstrations exist: SFT alone, or SFT then GRPO), put those
    # choices to the user" - the user chooses GRPO now, and the agent writes the spec with them
    assert "also offer the user (demonstrations exist):" in out and "lora-qlora-recipes then grpo-rlvr-training" in out
    assert "use `type: json_match` twice" in " ".join(body.split())
    _write_spec(run_dir, tiny_model_dir)
    resume("Phase 1")

    # Phase 1 on the import path: render, emit the requests; the printed import line is the file's, word for word
    walk.run(_line(calls, "rewards render"))
    assert (run_dir / "rewards_jsonmatch.py").is_file()
    emit, import_line = (_line(calls, "inspect sample", "--emit-requests", conditional=True),
                         _line(calls, "inspect sample", "--import-base", conditional=True))
    assert emit.condition and "no CUDA GPU" in emit.condition
    out = walk.run(emit)
    walk.assert_next(out, "README.md; then", import_line)
    readme = " ".join((run_dir / "requests" / "README.md").read_text().split())
    assert walk.prefix + " " + shlex.join(walk.argv(import_line)) in readme

    labels = _sample_on_the_gpu_box(run_dir, corpus)
    score, review_md = _line(calls, "inspect score"), _line(calls, "inspect review", "--format md")
    walk.assert_next(walk.run(import_line), "next:", score)
    out = walk.run(score)
    assert "→ learnable" in out and "0 red flag(s), 0 of" in out and "hack probe(s) passing" in out, out
    assert "PROVISIONAL" not in out  # the import line carries --base-temperature
    walk.assert_next(out, "next:", review_md, prefix_only=True)  # the file picks --format md among those offered

    # the blind sheet, the agent's whole reading (the corpus reader's labels), then the key
    key, verdict = _line(calls, "inspect review", "--key"), _line(calls, "inspect verdict")
    out = walk.run(review_md)
    walk.assert_next(out, "record the verdicts, then:", key)
    sheet = (run_dir / "review.md").read_text(encoding="utf-8")
    assert "a non-ISO date of the right day is correct but malformed" in " ".join(sheet.split())  # field by field
    ids = [sid for sid in labels if f"`{sid}`" in sheet]
    assert len(ids) == 60 and "| score |" not in sheet and "Rewards' view" not in sheet  # blind: no score yet
    kinds = {(labels[sid]["correct"], labels[sid]["well_formed"]) for sid in ids}
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}  # every reading rule is used
    (run_dir / "reading.jsonl").write_text("".join(json.dumps({"id": sid, **labels[sid]}) + "\n" for sid in ids))
    out = walk.run(verdict)
    assert "recorded 60 verdict(s) of the agent" in out
    walk.run(key)
    assert (run_dir / "review_key.md").is_file()

    # (b): the user reads the samples themselves. The HTML page's printed next step is the file's human-verdict
    # line, which is not among the pre-approved tools: here the test plays the person who read the page, exported
    # verdicts.jsonl and approved that command (their verdicts are the same careful labels)
    human = _line(calls, "inspect human-verdict", conditional=True)
    assert not any("human-verdict" in tool for tool in front["allowed-tools"])
    out = walk.run(_line(calls, "inspect review", "--format html"))
    walk.assert_next(out, "then the person runs it themselves:", human, prefix_only=True)
    page = (run_dir / "review.html").read_text(encoding="utf-8")
    told = re.search(r"Then run:\s*<code>(.*?)</code>", page, re.S)
    assert told, "review.html tells the person no command"
    # the page tells the person the same: their own path, not the agent's
    walk.assert_next("Then run: " + html.unescape(told.group(1)), "Then run:", human, prefix_only=True)
    (project / "verdicts.jsonl").write_text(_export(page, labels))
    out = walk.run(human, code=2)  # it shows the person what it will record, and records on their yes
    assert "to record: 60 verdict(s)" in out and "replaces 60 earlier verdict(s) (60 of the agent" in out, out
    r = cli(*walk.argv(human), "--yes")
    assert r.code == 0 and f"recorded 60 verdict(s) of {USER}" in r.out, r

    # the gate: PASS on a person's reading, zero disagreements, no flag, no passing probe
    out = walk.run(_line(calls, "inspect gate"))
    assert "0 disagreement(s), 0 open flag(s), 0 passing probe(s)" in out and "gate PASS" in out, out
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["status"] == "PASS" and gate["readers"] == ["human"]
    assert gate["paths"]["counts"] == {"human-verdict": 60}  # the person's path, not the agent's
    assert not gate["blind"]["judged_after_reveal"]  # the page kept each first verdict from before its reveal
    assert gate["gated_agreements"]  # right values in the wrong shape: correct, malformed, and so rejected
    resume("Phase 2")

    # Phase 2: memory, config render (exit 0), and BRIEF.md names the json_match rewards
    walk.run(_line(calls, "memory"))
    walk.run(_line(calls, "config render"))
    brief = (run_dir / "config" / "BRIEF.md").read_text(encoding="utf-8")
    assert "json_shape" in brief and "json_fields" in brief and "json_match" in brief
    assert (run_dir / "config" / "train.py").is_file() and (run_dir / "memory.md").is_file()
    resume("Phase 3 - training (missing)")

    # in the file's order: its unconditional lines as written (the import branch stands in for the `inspect sample`
    # line a GPU machine runs, the person's reading for `inspect confirm`), each conditional one where it applies
    steps = [calls.index(c) for c in walk.ran if c is not status and c.condition is None]
    assert steps == sorted(steps), [walk.ran]
    skipped = {_verb(c.line) for c in calls[:max(steps)] if c.condition is None and c not in walk.ran}
    assert skipped == {"bootstrap", "inspect sample", "inspect confirm"}, skipped  # bootstrap ran through bash


PHRASING = "Return the fields of this invoice as a JSON object (vendor, date, total, currency, invoice_number).\n\n{ocr}"


@pytest.mark.slow
def test_agent_fixes_the_reward_then_reads_a_fresh_blind_set(cli, tiny_model_dir, tmp_path, monkeypatch):
    """Phase 1 with a fix: a first reward design the reading disagrees with FAILs; after the fix the same reading
    PASSes but the gate says first that it was not blind and prints the command file's fresh-set line; the agent runs
    it, reads the held-back samples blind, and the gate PASSes on a blind reading."""
    monkeypatch.setenv("COLUMNS", "1000")
    _, _, calls = _command()
    corpus = _corpus()
    project, run_dir = _empty_project(tmp_path, corpus)
    with (run_dir / "data.jsonl").open("a", encoding="utf-8") as f:  # the user's data: two phrasings per invoice
        for gold, ocr, *_ in corpus.INVOICES:
            f.write(json.dumps({"prompt": PHRASING.format(ocr=ocr), "gold": gold}, ensure_ascii=False) + "\n")
    monkeypatch.chdir(project)
    data = _plugin_data(tmp_path)
    walk = Walk(cli, data, run_dir, {"BASE_TEMPERATURE": "0.3", "USER_NAME": USER,
                                     "STATEMENT": "I checked the agent's verdicts on the sheet and agree."})
    (run_dir / "answers.yaml").write_text(yaml.safe_dump({
        "verifiable": True, "signal_kind": "exact_match", "demonstrations": False, "preference_pairs": False,
        "human_judged": False, "base_success": "sometimes"}))
    walk.run(_line(calls, "route"))
    strict = {**FIELDS, "vendor": "exact"}  # the first design: the vendor character for character
    _write_spec(run_dir, tiny_model_dir, fields=strict, held_back=9)  # ceil(min_read 50 / per_prompt 6)
    walk.run(_line(calls, "rewards render"))
    walk.run(_line(calls, "inspect sample", "--emit-requests", conditional=True))
    labels = _sample_on_the_gpu_box(run_dir, corpus)
    walk.run(_line(calls, "inspect sample", "--import-base", conditional=True))
    score, review_md, verdict, key, confirm, gate = (
        _line(calls, "inspect score"), _line(calls, "inspect review", "--format md"), _line(calls, "inspect verdict"),
        _line(calls, "inspect review", "--key"), _line(calls, "inspect confirm"), _line(calls, "inspect gate"))
    walk.run(score)

    def read_sheet() -> set[str]:
        sheet = (run_dir / "review.md").read_text(encoding="utf-8")
        ids = {sid for sid in labels if f"`{sid}`" in sheet}
        (run_dir / "reading.jsonl").write_text("".join(json.dumps({"id": sid, **labels[sid]}) + "\n"
                                                       for sid in sorted(ids)))
        walk.run(verdict)
        walk.run(key)
        # the user checked the reading and types the confirm line themselves: it shows what it records, then --yes
        out = walk.run(confirm, code=2)
        assert "to confirm: the agent's reading of" in out, out
        assert cli(*walk.argv(confirm), "--yes").code == 0
        return ids

    walk.run(review_md)
    first = read_sheet()
    held = set(json.loads((run_dir / "sample_info.json").read_text())["held_back"])
    assert len(first) == 60 and len(held) == 54 and not first & held
    out = walk.run(gate, code=1)
    assert "false negative" in out and "NOT BLIND" not in out, out

    # the fix in the spec, re-rendered and re-scored: the same reading agrees, but it is no test of the fixed reward
    _write_spec(run_dir, tiny_model_dir, held_back=9)
    walk.run(_line(calls, "rewards render"))
    walk.run(score)
    status = walk.run(_line(calls, "status"))
    assert "not blind" in status and "--fresh" in status, status
    out = walk.run(gate)
    assert out.splitlines()[0].startswith("PASS on a reading that was NOT BLIND: the reward changed after the reader "
                                          "saw the scores of 60 of 60 samples"), out
    fresh = _line(calls, "inspect review", "--fresh", conditional=True)
    assert walk.prefix + " " + shlex.join(walk.argv(fresh)) in " ".join(out.split())  # the file's line, offered

    # the fresh blind set: the held-back samples, read before their key
    out = walk.run(fresh)
    assert "54 held-back samples" in out
    assert read_sheet() == held
    out = walk.run(gate)
    assert "gate PASS" in out and "NOT BLIND" not in out, out
    record = json.loads((run_dir / "gate.json").read_text())
    assert record["blind"]["reading"] == "fresh" and record["blind"]["reading_blind"] is True
    assert record["counts"]["disagreements"] == 0
