"""references/reward-functions.md: generated from the kinds' folders and the shared templates, and current."""

from __future__ import annotations

from reward_helpers import reward_specs

from finetune.rewards.reference import reward_functions_doc
from finetune.rewards.render import render_sources


def test_committed_reward_functions_doc_matches_templates(repo_root):
    committed = (repo_root / "references" / "reward-functions.md").read_text(encoding="utf-8")
    from finetune import docs

    expected = docs.with_toc(docs.reward_reference())  # the templates' doc + the sample formats, with its TOC
    assert reward_functions_doc().split("\n", 2)[2].strip() in committed  # everything below the title, unchanged
    assert committed == expected, "references/reward-functions.md drifted: run `finetune docs`"


def test_reward_functions_doc_shows_the_rendered_code():
    doc = reward_functions_doc()
    source = render_sources(reward_specs([{"name": "format", "type": "format", "pattern": "think_answer"}]))["rewards.py"]
    start = source.index("def _format_reason(")
    assert source[start:source.index("\n\n\n", start)] in doc
    for bug in ("trl#6966", "Visual-RFT#176", "open-r1#86", "signal.alarm"):
        assert bug in doc
