"""Every section of the GRPO skill's source spec (the Chinese seed) has a home in the product.

The table in references/seed-traceability.md maps seed text to a file and an anchor text in it. This
test parses the seed's section headings, requires a row for each, and checks that every row quotes real
seed text and that its target exists and contains the anchor (whitespace-insensitive).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TABLE = Path("references/seed-traceability.md")
CJK = re.compile(r"[\u4e00-\u9fff]")
SENTENCE_END = ("。", "：", "，", "；", ":", ".", "，")


def seed_path(repo_root: Path) -> Path:
    for cand in (repo_root.parent / "shared" / "seed", repo_root / "shared" / "seed"):
        p = cand / "grpo-rlvr-training.zh.txt"
        if p.is_file():
            return p
    pytest.skip("the seed text (grpo-rlvr-training.zh.txt, kept beside the repository) is not on this machine")


def squash(text: str) -> str:
    """Whitespace-free form: the seed breaks lines and inserts spaces inside phrases."""
    return re.sub(r"\s+", "", text)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def seed_headings(text: str) -> list[str]:
    """Section headings of the plain-text seed: a short standalone line (blank line before and after) that
    is Chinese text rather than a sentence, code or a bullet; the first line is the skill's name."""
    lines = text.splitlines()
    headings = [lines[0].strip()]
    for i in range(1, len(lines) - 1):
        line = lines[i].strip()
        if not line or lines[i - 1].strip() or lines[i + 1].strip():
            continue
        if len(line) > 30 or line.startswith("•") or "\t" in line or line.endswith(SENTENCE_END):
            continue
        if CJK.search(line):
            headings.append(line)
    return headings


def table_rows(repo_root: Path) -> list[tuple[int, str, str, str, str]]:
    rows = []
    for lineno, line in enumerate((repo_root / TABLE).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.startswith("| ") or line.startswith("| seed |") or line.startswith("|---"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        assert len(cells) == 4, f"{TABLE}:{lineno}: expected 4 cells, got {len(cells)}"
        rows.append((lineno, *cells))
    return rows


def test_heading_parser_finds_the_seed_sections(repo_root):
    headings = seed_headings(seed_path(repo_root).read_text(encoding="utf-8"))
    # the seed's known structure: name, title, and six titled sections
    assert headings[:2] == ["grpo-rlvr-training", "GRPO 与 RLVR 训练"]
    assert {"RL 何时适用", "配方", "检查规则", "变体选择", "VLM RL 仅供参考", "参考资料"} <= set(headings)
    assert "trainer.train()" not in headings


def test_every_seed_heading_has_a_row(repo_root):
    headings = seed_headings(seed_path(repo_root).read_text(encoding="utf-8"))
    keys = {squash(r[1]) for r in table_rows(repo_root)}
    missing = [h for h in headings if squash(h) not in keys]
    assert not missing, f"seed sections without a row in {TABLE}: {missing}"


def test_every_row_quotes_the_seed_and_its_target_holds_the_anchor(repo_root):
    seed = squash(seed_path(repo_root).read_text(encoding="utf-8"))
    rows = table_rows(repo_root)
    assert len(rows) >= 30
    problems = []
    for lineno, key, _english, target, anchor in rows:
        where = f"{TABLE}:{lineno}"
        if squash(key) not in seed:
            problems.append(f"{where}: '{key}' does not occur in the seed")
        path = repo_root / target
        if not path.is_file():
            problems.append(f"{where}: target {target} does not exist")
            continue
        if normalise(anchor) not in normalise(path.read_text(encoding="utf-8")):
            problems.append(f"{where}: {target} does not contain '{anchor}'")
    assert not problems, "\n".join(problems)


def test_rows_point_into_the_product_not_the_seed(repo_root):
    for _, _, _, target, _ in table_rows(repo_root):
        assert not target.startswith(("../", "/")) and "seed" not in target.split("/")[0], target
