"""`finetune docs [--check]`: regenerates registered targets atomically, reports drift, never skips a
producer it cannot import. Tests inject a registry with producers from a temp module."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import pytest

from finetune import docs
from finetune.docs import Target


@pytest.fixture
def producers(tmp_path, monkeypatch):
    """A real importable module (written to disk) whose functions are the producers."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / "fake_producers.py").write_text(textwrap.dedent("""\
        VALUE = {"n": 3}

        def whole():
            return f"# Table\\n\\nn = {VALUE['n']}\\n"

        def broken():
            raise KeyError("gate")

        def block():
            return f"```python\\nN = {VALUE['n']}\\n```"
        """))
    monkeypatch.syspath_prepend(str(mod_dir))
    sys.modules.pop("fake_producers", None)
    import fake_producers

    yield fake_producers
    sys.modules.pop("fake_producers", None)


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "plugin"
    (r / "references").mkdir(parents=True)
    (r / "skills" / "s").mkdir(parents=True)
    (r / "skills" / "s" / "SKILL.md").write_text(
        "intro\n<!-- generated:blk:start -->\nold\n<!-- generated:blk:end -->\noutro\n")
    return r


REGISTRY = (Target("references/table.md", "fake_producers:whole"),
            Target("skills/s/SKILL.md", "fake_producers:block", region="blk"))


def run_docs(root: Path, check: bool, registry=REGISTRY) -> int:
    from finetune.cli import docs as docs_cli  # the command itself, with the CLI's exit-code mapping below
    from finetune.errors import CheckFailed, UserError

    try:
        return docs_cli.run(argparse.Namespace(check=check, root=str(root)), registry=registry)
    except CheckFailed:
        return 1
    except UserError:
        return 2


def test_write_then_check_is_clean(root, producers, capsys):
    assert run_docs(root, check=True) == 1  # nothing generated yet: both drifted
    out = capsys.readouterr().out
    assert "references/table.md: drifted" in out and "skills/s/SKILL.md (region 'blk'): drifted" in out
    assert not (root / "references" / "table.md").exists()  # --check writes nothing
    assert run_docs(root, check=False) == 0
    assert (root / "references" / "table.md").read_text() == "# Table\n\nn = 3\n"
    assert (root / "skills" / "s" / "SKILL.md").read_text() == (
        "intro\n<!-- generated:blk:start -->\n```python\nN = 3\n```\n<!-- generated:blk:end -->\noutro\n")
    assert run_docs(root, check=True) == 0
    assert not list(root.rglob(".*.tmp"))


def test_check_names_the_drifted_target_only(root, producers, capsys):
    assert run_docs(root, check=False) == 0
    producers.VALUE["n"] = 4  # the code changed; the docs did not
    skill_before = (root / "skills" / "s" / "SKILL.md").read_text()
    capsys.readouterr()
    assert run_docs(root, check=True) == 1
    out = capsys.readouterr().out
    assert "references/table.md: drifted from fake_producers:whole()" in out
    assert "skills/s/SKILL.md (region 'blk'): drifted" in out
    assert (root / "skills" / "s" / "SKILL.md").read_text() == skill_before


def test_hand_edit_inside_a_region_is_drift(root, producers, capsys):
    assert run_docs(root, check=False) == 0
    skill = root / "skills" / "s" / "SKILL.md"
    skill.write_text(skill.read_text().replace("N = 3", "N = 5"))
    capsys.readouterr()
    assert run_docs(root, check=True) == 1
    out = capsys.readouterr().out
    assert "region 'blk'" in out and "references/table.md" not in out
    # text outside the region is the author's, never generated
    skill.write_text(skill.read_text().replace("N = 5", "N = 3").replace("outro", "edited outro"))
    assert run_docs(root, check=True) == 0


def test_unimportable_producer_fails_loudly(root, producers, capsys):
    registry = REGISTRY + (Target("references/later.md", "finetune.not_written_yet:reference_doc"),
                           Target("references/nofunc.md", "fake_producers:missing"),
                           Target("references/broken.md", "fake_producers:broken"))
    assert run_docs(root, check=False, registry=registry) == 1
    out = capsys.readouterr().out
    assert "references/later.md: cannot generate: producer finetune.not_written_yet:reference_doc unavailable" in out
    assert "fake_producers has no function missing()" in out
    assert "references/broken.md: cannot generate: producer fake_producers:broken raised KeyError: 'gate'" in out
    # the available targets were still generated; the unavailable one was not invented
    assert (root / "references" / "table.md").is_file() and not (root / "references" / "later.md").exists()


def test_missing_markers_are_bad_input(root, producers):
    (root / "skills" / "s" / "SKILL.md").write_text("no markers here\n")
    assert run_docs(root, check=True) == 2


def test_repo_targets_owned_by_this_module_are_current(repo_root):
    mine = [t for t in docs.REGISTRY if t.producer.startswith(("finetune.route:", "finetune.docs:"))]
    outcomes = docs.sync(repo_root, check=True, registry=mine)
    assert [o.status for o in outcomes] == ["ok"] * len(outcomes) and len(outcomes) >= len(mine)  # + TOC regions


def test_registry_matches_design_and_references_readme(repo_root):
    design = (repo_root / "DESIGN.md").read_text()
    readme = (repo_root / "references" / "README.md").read_text()
    for target in docs.REGISTRY:
        module, func = target.producer.split(":")
        assert f"`{module}.{func}()`" in design, target
        if target.path.startswith("references/"):
            assert Path(target.path).name in readme, target


def test_long_references_open_with_a_linked_table_of_contents(repo_root, tmp_path):
    for path in sorted((repo_root / "references").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > docs.TOC_MIN_LINES:
            head = "\n".join(text.splitlines()[:5])
            assert "<!-- generated:toc:start -->" in head and "## Contents" in text, path.name
    # a hand-written reference that grows past 100 lines gets one from `finetune docs`; --check sees it missing
    root = tmp_path / "plugin"
    (root / "references").mkdir(parents=True)
    long = "# Long\n\nintro\n\n" + "".join(f"## Part {i}\n\n" + "text\n" * 10 for i in range(12))
    (root / "references" / "long.md").write_text(long)
    outcomes = docs.sync(root, check=True, registry=())
    assert [o.status for o in outcomes] == ["drifted"]
    docs.sync(root, check=False, registry=())
    text = (root / "references" / "long.md").read_text()
    assert "- [Part 11](#part-11)" in text and text.index("## Contents") < text.index("intro")
    assert [o.status for o in docs.sync(root, check=True, registry=())] == ["ok"]
    from finetune import lint

    assert not [f for f in lint.check_links(root / "references" / "long.md", text, root)]
