"""references/reward-functions.md, generated from the reward templates and the kinds' entries (``finetune docs``
renders it; ``finetune docs --check`` fails CI when it and the code drift): every kind's fields, notes, reasons,
example entry and the very code ``rewards render`` writes for it."""

from __future__ import annotations

import json
from typing import Any

from finetune import literals
from finetune.rewards.kind import COMMON_REASONS, KINDS, TEMPLATES, Kind
from finetune.rewards.render import HELPER_FILES, Rendered, _macros, _render_helper, environment, plan
from finetune.rewards.specs import PARTIAL_CEILING, ordering_margin, penalty_floors

DOC_EXAMPLES: dict[str, dict[str, Any]] = {t: k.example for t, k in KINDS.items()}


def _field_rows(model: Any) -> list[dict[str, str]]:
    rows = []
    for name, info in model.model_fields.items():
        shown = info.alias or name
        if shown == "type":
            continue
        default = "required" if info.is_required() else (
            "[]" if info.default_factory is not None else json.dumps(info.default))
        rows.append({"name": shown, "default": default, "meaning": (info.description or "").replace("|", "/")})
    return rows


def _type_rows() -> list[dict[str, str]]:
    from finetune.rewards.registry import REWARD_TYPES

    return [{"type": t, "default_role": cls.default_role, "allowed": ", ".join(cls.allowed_roles),
             "low": "floor (≤ 0)" if cls.default_role == "shaping" else str(cls.min_score), "high": str(cls.max_score),
             "helpers": ", ".join(HELPER_FILES[h] for h in KINDS[t].helpers) or "—",
             "packages": ", ".join(KINDS[t].packages) or "stdlib"} for t, cls in REWARD_TYPES.items()]


def _reasons(entry: Kind) -> list[dict[str, str]]:
    """The reason ids a kind's reward logs (beside the shared ones), with what each means and what changes it."""
    from finetune.rewards.registry import explain

    return [{"id": rid, "meaning": reason.text, "fix": explain(rid, entry.type)[1]}
            for rid, reason in entry.reasons.items() if rid not in COMMON_REASONS]


def _kind_sections(examples: dict[str, Any]) -> list[dict[str, Any]]:
    """Per reward type: its doc, fields, failure notes, example entry, rendered function and library code."""
    import yaml

    from finetune.rewards.registry import REWARD_TYPES

    planned = {p.spec.name: p for p in plan(list(examples.values()), 1024)}
    sections: list[dict[str, Any]] = []
    for t, cls in REWARD_TYPES.items():
        module = _macros(KINDS[t].template)
        example = examples[t]
        p = planned[example.name]
        function = module.reward(example, *p.args)
        sections.append({"title": KINDS[t].title, "type": t, "gated": p.meta.gated, "reasons": _reasons(KINDS[t]),
                         "doc": (cls.__doc__ or "").strip().replace("\n    ", "\n"),
                         "fields": _field_rows(cls), "notes": list(KINDS[t].notes),
                         "example_yaml": yaml.safe_dump([DOC_EXAMPLES[t]], sort_keys=False, width=100).rstrip(),
                         "function": function.strip(), "library": module.library().strip()})
    return sections


def reward_functions_doc() -> str:
    """The whole of references/reward-functions.md (templates/reward-functions.md.j2), rendered from the
    reward templates."""
    import yaml
    from pydantic import TypeAdapter

    from finetune.rewards.registry import RewardSpec

    union: Any = RewardSpec  # a discriminated union built from the registry at import time
    adapter: TypeAdapter[Any] = TypeAdapter(union)
    examples = {t: adapter.validate_python(d) for t, d in DOC_EXAMPLES.items()}
    composite = [examples["format"], examples["exact_match"], examples["length_penalty"]]
    usage = {"rewards": [DOC_EXAMPLES["format"], DOC_EXAMPLES["exact_match"], DOC_EXAMPLES["length_penalty"]]}
    env = literals.environment(TEMPLATES)
    return env.get_template("reward-functions.md.j2").render(
        usage_yaml=yaml.safe_dump(usage, sort_keys=False, width=100).rstrip(), types=_type_rows(),
        partial_ceiling=str(PARTIAL_CEILING), margin=f"{ordering_margin(composite):g}",
        overlong_floor=f"{penalty_floors(composite)['overlong']:g}",
        rules=[{"text": rule, "why": why} for rule, why in READING_RULES],
        reasons=[{"id": r, "meaning": reason.text, "fix": reason.fix or "—"} for r, reason in COMMON_REASONS.items()],
        common_library=_macros("_common.py.j2").library().strip(),
        kinds=_kind_sections(examples),
        format_gate=_render_gate([p for p in plan(composite, 1024) if p.meta.role == "format"]).strip(),
        mathpool=_render_helper("mathpool").strip())


# The rules a careful reader applies, each with its reason; the code is rewards_answers.py.
READING_RULES = (
    ("The final answer is the LAST answer container (`\\boxed{}`, `<answer>`, a `####` line, a \"the answer is "
     "...\" sentence, per `pattern` / `extract`).", "A reader takes the conclusion, not a value mentioned on the way."),
    ("Prose, punctuation, markdown emphasis (`**\\boxed{72}**`), math delimiters (`\\( \\)`, `$ $`, `\\[ \\]`) and "
     "closing remarks after the container are allowed; `trailing_text: forbid` restores a bare format.",
     "Instruct models write \"Therefore \\(\\boxed{72}\\) clips.\" — scoring that 0 teaches GRPO to avoid a correct, "
     "normal style."),
    ("Containers inside a closed `<think>` block are reasoning; a `<think>` never closed means no final answer.",
     "A guess boxed while thinking is not the answer; a completion cut inside its reasoning has none."),
    ("Several containers with different values score 0; the same value twice is fine; for a multi-value gold "
     "(list, interval, `\\pm`, `2 and 3`) several boxes naming exactly its values are correct.",
     "Spraying candidates is a hedge; restating the answer is not."),
    ("A container naming more than one candidate scores 0: `or` (also inside `\\text{ or }`), `either`, a "
     "parenthetical alternative `13 \\text{ (or 14)}`, word/word alternatives; a unit (`7.5 \\text{ hours}`, "
     "`42 pages`) is not a hedge, and a fraction `3/4` is not an alternative.", "A hedge is never correct."),
    ("A retraction after the container (\"no wait, it is 6\", \"that is wrong\") voids it; a re-check that lands on "
     "the same value does not.", "The model's last word is the answer a reader takes."),
    ("A boxed value the completion's own words reject scores 0 (`rejected`): \"so it is not 12\", \"12 is not the "
     "answer\", \"which is wrong\", `the answer is not \\boxed{12}`; a negation of another value "
     "(`\\boxed{12}, not 15`) or of something else (\"12 is not prime\") leaves it standing.",
     "An answer the model itself disowns is not its final answer."),
    ("Units (`math`): an answer and a gold that both carry a unit of length, mass, time, volume or money (and their "
     "powers and ratios: `cm^2`, `km/h`) must measure the same quantity (else `unit_mismatch`); another unit of "
     "that quantity is converted exactly (`2 km` = `2000 m`, `90 minutes` = `1.5 hours`), so `5 m` is not `5 cm`.",
     "math-verify drops unit words: the same number in another unit would pass."),
    ("Two plain decimals (`math`) are equal only when they are the same value (`3.14159270` = `3.1415927`, "
     "`1.25 \\times 10^{-5}` = `0.0000125`); math-verify's 6-decimal rounding is not used for them, so "
     "`3.1415929` is not `3.1415927`.", "A value that differs in a late significant digit is another value."),
    ("Numbers: `3\\,600`, `3{,}600`, `3 600`, `3,600`, `3600.0`, `3.6e3`, `3.6 \\times 10^3` and Unicode digits equal "
     "3600; `\\frac13`, `\\sqrt3`, `\\tfrac12` are expanded.",
     "These are spellings of one value, not different answers."),
    ("Golds are parsed WHOLE (`10\\sqrt{2}`, `[-2, 7]`, `3, 5, 7`, `2\\pi` as one expression); a gold written as a "
     "solution is read at its final container; a gold no reading accounts for is None (not applicable) and "
     "counted in `rewards/<name>/unusable_gold`.",
     "Cutting a gold to its last number credits one root or one endpoint (TRL's `accuracy_reward`, open-r1)."),
)


def _render_gate(format_plans: list[Rendered]) -> str:
    source = environment().get_template("rewards.py.j2").render(
        run_name="doc", spec_path="spec.yaml", section_digest="-" * 16, rewards=format_plans, packages=[],
        helper_files=[], helper_modules=[], stdlib_imports=[], package_imports=[], gated=True,
        margin=0.0, library_templates=[], caches=[])
    start = source.index("_FORMAT_REWARDS = ")
    return source[start:source.index("# What each reward is")]
