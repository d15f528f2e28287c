"""RewardMeta (rewards_meta.py, copied beside rewards.py): one reward as the renderer decided it, read everywhere.

The round trip: one spec's rewards through ``rewards render``, Phase 1 (load_rewards), the gate (the score report's
reward entries), train.py (the rendered rewards.py loaded by path in a clean interpreter, its metas handed to the
inspection callback), watch.py and ``finetune diagnose`` (from the spec and from rewards.py alone) give the same
RewardMeta — and no module outside the renderer computes a role, threshold or range from the spec again.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from finetune.rewards.lib.rewards_meta import RewardMeta

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "scripts" / "finetune"

SPEC = """\
name: roundtrip
model: tiny
dataset: {path: data.jsonl}
environment: {file: env.py, class: Calculator}
rewards:
  - {name: fmt, type: format, pattern: answer_tag, weight: 0.2}
  - {name: correct, type: exact_match, answer_column: answer}
  - {name: schema_ok, type: json_schema, schema: {type: object}, partial_credit: true, threshold: 0.8, weight: 0.5}
  - {name: solved, type: environment}
  - {name: overlong, type: length_penalty, overlong_buffer: 16}
generation: {max_completion_length: 64}
"""


def _meta(**over: object) -> RewardMeta:
    base: dict[str, object] = {"name": "r", "type": "exact_match", "role": "correctness", "weight": 1.0,
                               "threshold": 1.0, "min": 0.0, "max": 1.0, "gated": False, "episode": False}
    return RewardMeta(**{**base, **over})  # type: ignore[arg-type]


@pytest.mark.parametrize("over, message", [
    ({"role": "bonus"}, "role 'bonus'"), ({"name": "not a name"}, "not a Python identifier"),
    ({"threshold": float("nan")}, "threshold nan"), ({"min": 2.0}, "min 2.0 is above max"),
    ({"gated": "yes"}, "gated 'yes'"), ({"weight": True}, "weight True"),
])
def test_a_meta_that_cannot_be_a_rendered_one_is_refused_in_one_line(over: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _meta(**over)


def test_of_reads_a_mapping_or_another_copy_of_the_class_and_names_what_is_missing() -> None:
    m = _meta(name="correct", threshold=0.8)
    assert RewardMeta.of({**m.as_dict(), "mean": 0.4, "n": 12}) == m  # a score report entry: stats beside it
    copy = type("RewardMeta", (), m.as_dict())()  # the run folder's copy of the class: read attribute by attribute
    assert RewardMeta.of(copy) == m and m.passes(0.8) and not m.passes(0.79) and not m.passes(None)
    with pytest.raises(ValueError, match="no weight, gated, episode"):
        RewardMeta.of({"name": "r", "type": "format", "role": "format", "threshold": 1.0, "min": 0.0, "max": 1.0})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RewardMeta]]:
    """A spec (every role, a gated reward, an episode reward, a partial-credit threshold, a length floor) rendered
    into a run folder, with two samples; and the RewardMeta the renderer decided for it."""
    from finetune.rewards.render import render_rewards, reward_metas
    from finetune.spec import load_spec

    folder = tmp_path_factory.mktemp("roundtrip")
    shutil.copy(ROOT / "examples" / "tool-environment" / "env.py", folder / "env.py")
    (folder / "spec.yaml").write_text(SPEC, encoding="utf-8")
    (folder / "data.jsonl").write_text(json.dumps({"prompt": "1 + 1?", "answer": "2"}) + "\n", encoding="utf-8")
    spec = load_spec(folder / "spec.yaml")
    render_rewards(spec, folder)
    samples = [{"id": f"s{i}", "row": 0, "prompt": "1 + 1?", "completion": text, "columns": {"answer": "2"}}
               for i, text in enumerate(["<answer>2</answer>", "I think 3"])]
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    return folder, reward_metas(spec)


def test_the_renderer_decides_each_value_once(run: tuple[Path, list[RewardMeta]]) -> None:
    _, metas = run
    by = {m.name: m for m in metas}
    assert [m.role for m in metas] == ["format", "correctness", "correctness", "correctness", "shaping"]
    assert [m.gated for m in metas] == [False, True, True, True, False]
    assert [m.episode for m in metas] == [False, False, False, True, False]
    assert by["schema_ok"].threshold == 0.8 and by["schema_ok"].weight == 0.5
    # the length floor: half the ordering margin (the lightest format weight, 0.2), as the composite allows
    assert by["overlong"].min == pytest.approx(-0.1) and by["overlong"].max == 0.0 and by["overlong"].threshold == 0


def test_one_specs_rewards_give_the_same_meta_everywhere(run: tuple[Path, list[RewardMeta]]) -> None:
    from finetune.diagnose.context import _reward_meta_from_rewards_py, load_context
    from finetune.inspect import score
    from finetune.inspect.rewardmod import load_rewards
    from finetune.spec import load_spec

    folder, metas = run
    spec = load_spec(folder / "spec.yaml")
    assert load_rewards(folder, [r.name for r in spec.rewards]).rewards == metas  # Phase 1
    _, report = score.compute(folder, spec)  # the score report the gate reads its metas from
    assert score.report_metas(report, folder) == metas
    assert report["not_applicable"][0]["reward"] == "solved"  # the episode mark, read from the meta
    log = folder / "train" / "metrics.jsonl"
    log.parent.mkdir(exist_ok=True)
    log.write_text(json.dumps({"step": 1, "reward": 1.0}) + "\n", encoding="utf-8")
    assert load_context(folder, log).rewards == metas  # diagnose, with the spec beside the run
    assert _reward_meta_from_rewards_py(folder / "rewards.py") == metas  # diagnose, from rewards.py alone


TRAIN_SIDE = """
import importlib.util, json, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
rewards = load("rewards", sys.argv[1] + "/rewards.py")  # by path, as train.py loads it
watch = load("finetune_watch", sys.argv[2])  # config/watch.py: a verbatim copy of finetune/watch.py
assert "finetune" not in sys.modules  # the training machine needs nothing of the plugin
# what the inspection callback does at each inspection (train.py hands it REWARD_META through watch.instrument)
rows = [{"completion": "x" * (8 * i), "completion_tokens": 8 * i, "total": 0.0,
         "scores": {m.name: (i / 12 if m.name == "solved" else m.max) for m in rewards.REWARD_META}}
        for i in range(1, 13)]
settings = watch.Settings(every_steps=1, sample_rows=4, max_completion_length=64, meta=list(rewards.REWARD_META))
stops, metrics = watch.stop_reasons(1, rows, [], settings, watch.WatchState())
flagged = sorted(f["id"] for f in watch.live_flags(rows, settings.meta))
print(json.dumps({"meta": [m.as_dict() for m in rewards.REWARD_META], "weights": rewards.REWARD_WEIGHTS,
                  "flagged": flagged, "stops": stops, "transformers": "transformers" in sys.modules}))
"""


def test_train_py_and_the_inspection_callback_read_the_rendered_meta(run: tuple[Path, list[RewardMeta]]) -> None:
    folder, metas = run
    done = subprocess.run([sys.executable, "-I", "-c", TRAIN_SIDE, str(folder), str(PACKAGE / "watch.py")],
                          capture_output=True, text=True, timeout=120, cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert [RewardMeta.of(m) for m in seen["meta"]] == metas and seen["weights"] == [m.weight for m in metas]
    # the episode reward rising with length is not flagged live (its meta says so); nothing else is flagged
    assert seen["flagged"] == [] and seen["stops"] == [] and not seen["transformers"], seen


# A reward's role, pass threshold, range, gating and episode mark are computed from the spec in one place
# (rewards/render.py's plan, with the kinds' own models); everyone else reads RewardMeta.
DERIVING = re.compile(r"\.(effective_role|pass_threshold|min_score|max_score)\b")
DECIDERS = ("rewards/render.py", "rewards/specs.py", "rewards/kinds/")
ELSEWHERE = {
    # the reference doc's table of each kind's default range (class facts of the models, no spec entry)
    "rewards/reference.py": 2,
    # the run summary's table of the spec's rewards (config render's BRIEF.md), written before any rewards.py
    "templates/BRIEF.md.j2": 1,
    # diagnose's fallback when a spec's rewards do not render at all: their roles are still the spec's
    "diagnose/context.py": 1,
}


def test_no_module_outside_the_renderer_derives_a_rewards_meta() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.suffix in (".py", ".j2") and not rel.startswith(DECIDERS):
            count = len(DERIVING.findall(path.read_text(encoding="utf-8")))
            if count:
                found[rel] = count
    assert found == ELSEWHERE, f"read the RewardMeta (rewards.py's REWARD_META) instead: {found}"
