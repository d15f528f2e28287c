"""commands/finetune.md runs exactly as written, in order, so the command cannot drift from the scripts.

The test parses the command's ```bash blocks (one invocation per line), substitutes what Claude Code
substitutes (${CLAUDE_PLUGIN_ROOT}, ${CLAUDE_PLUGIN_DATA}) and what the agent writes for $RUN (the run
directory it decided from $ARGUMENTS) and runs every invocation with
bash in a real subprocess, in the order of the Markdown. The placeholders the command asks the agent to
fill (the reading file the verdict line records; USER_NAME, STATEMENT for the confirmation) are filled
by the test acting as the agent, whose reading is the demo's independent checker.
Lines marked ``# only if: ...`` are the command's conditional branches: they are parsed by the CLI's own
argument parser (so a renamed flag fails here) but not run on the happy path.

The plugin data folder is a stand-in for ${CLAUDE_PLUGIN_DATA}: its venv/bin/finetune is this test
environment's console script, and its bootstrap stamps are current, so the bootstrap line reports "up to
date" (the install path itself is checked with --dry-run below).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ROOT / "commands" / "finetune.md"
BOOTSTRAP = ROOT / "scripts" / "bootstrap.sh"
FINETUNE = '"${CLAUDE_PLUGIN_DATA}/venv/bin/finetune"'


@dataclass
class Invocation:
    phase: str
    line: str  # as written, without the condition comment
    condition: str | None


def _split_frontmatter(text: str) -> tuple[dict, str]:
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert m, "commands/finetune.md needs YAML frontmatter"
    return yaml.safe_load(m.group(1)), text[m.end():]


def invocations(body: str) -> list[Invocation]:
    """Every script invocation of the command's ```bash blocks, in order, with its phase."""
    out: list[Invocation] = []
    phase = "(before Phase 0)"
    for m in re.finditer(r"^## (Phase \d)[^\n]*$|^[ \t]*```bash\n(.*?)^[ \t]*```", body, re.S | re.M):
        if m.group(1):
            phase = m.group(1)
            continue
        for raw in m.group(2).splitlines():
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            line, _, condition = raw.partition(" # only if: ")
            out.append(Invocation(phase, line.strip(), condition.strip() or None))
    return out


def _command() -> tuple[dict, str, list[Invocation]]:
    front, body = _split_frontmatter(COMMAND.read_text(encoding="utf-8"))
    return front, body, invocations(body)


# ------------------------------------------------------------------------------------------------
# the command's shape


def test_frontmatter_and_phases():
    front, body, calls = _command()
    assert front["description"] and len(front["description"]) <= 1024
    assert front["argument-hint"]
    # allowed-tools against every call: tests/test_command_permissions.py
    headings = re.findall(r"^## (Phase \d)", body, re.M)
    assert headings == [f"Phase {i}" for i in range(5)]
    for call in calls:  # every invocation is the bootstrap or the venv's finetune
        assert call.line.startswith(('"${CLAUDE_PLUGIN_ROOT}/scripts/', FINETUNE)), call.line
    assert calls[0].line == '"${CLAUDE_PLUGIN_ROOT}/scripts/bootstrap.sh" "${CLAUDE_PLUGIN_DATA}"'
    verbs = [_verb(c.line) for c in calls if c.condition is None]
    # Phase 1 in the gate's order, Phase 2 only after the gate
    order = ["rewards render", "inspect sample", "inspect score", "inspect review", "inspect verdict",
             "inspect confirm", "inspect gate", "memory", "config render", "diagnose"]
    positions = [verbs.index(v) for v in order]
    assert positions == sorted(positions), verbs
    verdict = next(c for c in calls if _verb(c.line) == "inspect verdict" and c.condition is None)
    assert "--reader agent" in verdict.line and verdict.phase == "Phase 1"


def _verb(line: str) -> str:
    """'inspect gate', 'memory', ... for a finetune line; 'bootstrap' for the bootstrap."""
    words = [w.replace("\\$", "$") for w in shlex.split(line.replace("$", "\\$"))]
    if words[0].endswith("/scripts/bootstrap.sh"):
        return "bootstrap"
    words = words[1:]
    return " ".join(words[:2]) if words and words[0] in ("inspect", "rewards", "config") else (words[0] if words else "")


# ------------------------------------------------------------------------------------------------
# running it


def _stamps(venv: Path) -> None:
    """The stamps scripts/bootstrap.sh writes after an install (same hashing as the script)."""
    deps = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    h = hashlib.sha256()
    pkg = ROOT / "scripts" / "finetune"
    for d, dirs, files in sorted(os.walk(pkg)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith(".pyc"):
                path = Path(d) / f
                h.update(str(path.relative_to(pkg)).encode() + b"\0" + path.read_bytes() + b"\0")
    (venv / f".deps-{deps}").touch()
    (venv / f".src-{h.hexdigest()[:16]}").touch()


def _plugin_data(tmp: Path) -> Path:
    data = tmp / "plugin-data"
    (data / "venv" / "bin").mkdir(parents=True)
    console_script = Path(sys.executable).parent / "finetune"
    assert console_script.exists(), "the test environment needs the `finetune` console script"
    (data / "venv" / "bin" / "finetune").symlink_to(console_script)
    _stamps(data / "venv")
    return data


def _substitute(line: str, data: Path, run_dir: Path) -> str:
    return (line.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)).replace("${CLAUDE_PLUGIN_DATA}", str(data))
            .replace("$RUN", str(run_dir)))


def _bash(line: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=600)


def _argv(line: str, values: dict[str, str]) -> list[str]:
    """The argv bash would build for ``line`` with ``values`` as its variables (VERDICT splits into words)."""
    for name, value in values.items():
        quoted = shlex.quote(value) if name != "VERDICT" else value
        line = line.replace(f'"${name}"', quoted).replace(f"${name}", quoted)
    return shlex.split(line)


def _run_dir(demo_run, tmp: Path) -> Path:
    """runs/<name>/ with a spec pointing at the demo's model and data, and the user's routing answers."""
    run_dir = tmp / "runs" / "copy-digits"
    run_dir.mkdir(parents=True)
    spec = yaml.safe_load((demo_run.out / "pass" / "spec.yaml").read_text())
    spec["model"] = str(demo_run.out / "model")
    spec["dataset"]["path"] = str(demo_run.out / "data" / "train.jsonl")
    spec["dataset"].pop("filter", None)  # the demo filtered its own run; this one starts from the gate
    heldout = spec["dataset"].get("heldout") or {}
    if heldout.get("path"):  # the demo's own held-out file, named from its run directory
        heldout["path"] = str((demo_run.out / "pass" / heldout["path"]).resolve())
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (run_dir / "answers.yaml").write_text(yaml.safe_dump({
        "verifiable": True, "signal_kind": "exact_match", "demonstrations": False, "preference_pairs": False,
        "human_judged": False, "base_success": "sometimes"}))
    return run_dir


@pytest.mark.slow
def test_command_runs_as_written(demo_run, tmp_path, capsys):
    from finetune.cli import build_parser
    from finetune.demo import checker as demo_checker
    from finetune.inspect import review
    from finetune.spec import load_spec

    _, _, calls = _command()
    data = _plugin_data(tmp_path)
    run_dir = _run_dir(demo_run, tmp_path)
    user = {"USER_NAME": "Test User", "STATEMENT": "I read the agent's verdicts on all samples and agree."}
    ran: list[str] = []
    for call in calls:
        line = _substitute(call.line, data, run_dir)
        if call.condition:
            argv = _argv(line, {"EXPORTED_VERDICTS": "x.jsonl", "FLAG": "flag", "REASON": "r",
                                "BASE_TEMPERATURE": "0.3", **user})
            if Path(argv[0]).name == "finetune":
                build_parser(argv[1]).parse_args(argv[1:])  # a renamed flag fails here
            continue
        verb = _verb(call.line)
        if verb == "inspect verdict":
            # the agent's reading, blind: the demo checker judges each sample of review.md, and the
            # agent writes the whole reading to the file the command records in one call
            sheet = (run_dir / "review.md").read_text()
            assert "| score |" not in sheet and "Rewards' view" not in sheet  # no reward score before the key
            items, _ = review.review_items(run_dir, load_spec(run_dir / "spec.yaml"))
            assert len(items) >= 50
            rows = []
            for it in items:
                assert f"`{it['id']}`" in sheet
                c = demo_checker.check(it["prompt"].removeprefix("[user] "), it["completion"], it["gold"])
                rows.append({"id": it["id"], "accept": c.accept, "correct": c.correct, "well_formed": c.well_formed,
                             "note": f"[{demo_checker.READER_LABEL}] {c.note}"})
            (run_dir / "reading.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            done = _bash(line, {})
            assert done.returncode == 0 and f"recorded {len(rows)} verdict(s)" in done.stdout, (line, done.stderr)
            ran.append(verb)
            continue
        if verb == "diagnose":
            # Phase 3 happened off-screen: the training engineer's run left its logs in train/
            shutil.copytree(demo_run.out / "pass" / "train", run_dir / "train",
                            ignore=shutil.ignore_patterns("*.safetensors"))
            (run_dir / "train" / "trainer_state.json").touch()  # copytree keeps the demo's (older) times
        if verb == "inspect confirm":  # the person's command: they read what it shows and answer yes
            line += " --yes"
        done = _bash(line, user)
        assert done.returncode == 0, (call.phase, line, done.stdout[-3000:], done.stderr[-3000:])
        if "bootstrap.sh" in call.line:
            assert "up to date" in done.stdout
        if verb == "status":  # a run directory with only the user's files resumes at Phase 0
            assert "resume: Phase 0 - route (missing)" in done.stdout, done.stdout
        ran.append(verb)

    assert ran[:3] == ["bootstrap", "status", "route"] and "config render" in ran and ran[-1] == "diagnose"
    assert json.loads((run_dir / "route.json").read_text())["route"] == "grpo-rlvr-training"
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["status"] == "PASS" and gate["confirmation"]["user"] == "Test User"
    assert (run_dir / "config" / "train.py").is_file() and (run_dir / "memory.md").is_file()
    assert (run_dir / "review.html").is_file()
    assert json.loads((run_dir / "diagnosis" / "diagnosis.json").read_text())["verdict"] in ("healthy", "symptom")
    # the same status line, once every phase has run: nothing to resume
    status = next(c for c in calls if _verb(c.line) == "status" and c.condition is None)
    done = _bash(_substitute(status.line, data, run_dir), {})
    assert done.returncode == 0 and "resume: nothing to do" in done.stdout, done.stdout


# ------------------------------------------------------------------------------------------------
# the bootstrap itself


def _bootstrap(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_PLUGIN_")}
    return subprocess.run(["bash", str(BOOTSTRAP), *args], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)


def test_bootstrap_dry_run_installs_pinned_torch_first_outside_the_plugin(tmp_path):
    data = tmp_path / "data"
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(ROOT)}, "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    torch_at, package_at = out.index("install --disable-pip-version-check --progress-bar on torch==2.13.0"), \
        out.index(f"install --quiet --disable-pip-version-check {data}/src")
    assert torch_at < package_at
    assert f"-m venv {data}/venv" in out and "bootstrap [1/5]" in out and "dry run, nothing changed" in out
    assert not data.exists() or not any(data.iterdir())  # a dry run changes nothing


def test_bootstrap_reinstalls_only_the_package_when_only_code_changed(tmp_path):
    data = _plugin_data(tmp_path)
    for stale in (data / "venv").glob(".src-*"):
        stale.unlink()
    (data / "venv" / ".src-0000000000000000").touch()
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(ROOT)}, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "reinstalling the package only" in r.stdout and "--no-deps" in r.stdout and "torch" not in r.stdout


def test_bootstrap_train_flag_installs_the_train_extra(tmp_path):
    fresh = tmp_path / "fresh"
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(fresh), "CLAUDE_PLUGIN_ROOT": str(ROOT)}, "--dry-run", "--train")
    assert r.returncode == 0, r.stderr
    assert f"install --quiet --disable-pip-version-check {fresh}/src[train]" in r.stdout
    # an up-to-date CLI install without the extra: --train installs it (pip skips what is satisfied) ...
    data = _plugin_data(tmp_path)
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(ROOT)}, "--dry-run", "--train")
    assert r.returncode == 0 and f"{data}/src[train]" in r.stdout and "--train asked for" in r.stdout, r.stdout
    # ... and once its stamp is there, nothing is left to do
    deps = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (data / "venv" / f".train-{deps}").touch()
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(data), "CLAUDE_PLUGIN_ROOT": str(ROOT)}, "--train")
    assert r.returncode == 0 and "up to date" in r.stdout, r.stdout


def test_bootstrap_refuses_a_data_folder_inside_the_plugin(tmp_path):
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(ROOT / "venv-data"), "CLAUDE_PLUGIN_ROOT": str(ROOT)})
    assert r.returncode == 2 and "inside the plugin folder" in r.stderr
    assert not (ROOT / "venv-data").exists()
    r = _bootstrap({"CLAUDE_PLUGIN_ROOT": str(ROOT)})
    assert r.returncode == 2 and "CLAUDE_PLUGIN_DATA is not set" in r.stderr
    r = _bootstrap({"CLAUDE_PLUGIN_DATA": str(tmp_path)}, "--bogus")
    assert r.returncode == 2 and "unknown option" in r.stderr
    r = _bootstrap({}, str(ROOT / "data"), "--dry-run")  # the folder as an argument, as the command passes it
    assert r.returncode == 2 and "inside the plugin folder" in r.stderr
