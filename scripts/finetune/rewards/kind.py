"""What a reward kind is: the :class:`Kind` entry and its hooks, the table :data:`KINDS` (type → entry) and the
``@kind`` decorator that registers a spec model.

Each kind is one folder, ``rewards/kinds/<type>/``: its spec model decorated with ``@kind(...)`` (the entry) in
``__init__.py``, its Jinja template ``template.py.j2`` and its ``notes.md``; importing
:mod:`finetune.rewards.kinds` imports every folder and so fills the table. Everything else in the package that
varies by reward kind asks an entry's hooks (:func:`kind_of`, :func:`reading_of`), never the reward's ``type``
string, and never a naming convention of the model's fields: the columns a kind reads, its gold and its reason ids
are hooks of its entry.
"""

from __future__ import annotations

import builtins
import re
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from finetune.errors import RegistryError
from finetune.rewards.lib import HELPERS

if TYPE_CHECKING:
    from finetune.rewards.lib.rewards_meta import RewardMeta

# The answer containers a reader takes the final answer from (hedge / retraction probes and the expected-pass
# controls apply to rewards whose layout is one of these).
READING_STYLES = ("boxed", "answer_tag", "think_answer", "hash_answer")
TEST_FORMATS = ("stdin_stdout", "function_call", "assert")  # how a code reward's tests are written


@dataclass(frozen=True)
class CodeTests:
    """The unit-test columns a reward runs (code probes, the no_hidden_tests flag, the tests report)."""

    column: str
    format: str  # stdin_stdout | function_call | assert
    hidden: str | None = None  # tests never shown in the prompt
    entry_point: str | None = None  # column naming the function the tests call
    format_column: str | None = None  # column naming a row's own format (a mixed set)

    def format_of(self, columns: Mapping[str, Any]) -> str:
        """The test format of the row whose cells are ``columns`` (its own, else the reward's)."""
        own = columns.get(self.format_column) if self.format_column else None
        return own.strip() if isinstance(own, str) and own.strip() in TEST_FORMATS else self.format


@dataclass(frozen=True)
class Reading:
    """How a reward reads a completion: what the probes, flags and reading sheets need to know of it.

    Returned by each kind's ``reading`` hook for one spec entry; every field defaults to "none of this"."""

    style: str | None = None  # the answer layout it expects (inspect.probes.layouts); None: no opinion
    extract: str | None = None  # the extraction it claims (a pass with nothing there is flagged)
    reads_answer: bool = False  # reads the final answer: reading probes and expected-pass controls apply
    tests: CodeTests | None = None  # the unit tests it runs (code hack probes)
    agent: bool = False  # scores tool calls: the agent hack probes apply
    call_format: str | None = None  # the tool-call syntax it reads (agent probes write their calls in it)
    extra_keys_forbidden: bool = False  # an invented JSON key fails it (the invented-field probe applies)
    trailing_forbidden: bool = False  # only closing delimiters may follow its answer (no prose-after controls)
    prefilled_think: bool = False  # it expects completions that start inside a <think> the template opened
    episode: bool = False  # scores the episode an environment ran (its calls replayed), not the completion's
    # text: the text-only controls (gold answer, well-formed vs malformed, length) carry no call, so the flags
    # read from them do not apply (inspect.flags.TEXT_ONLY)


GoldShape = Literal["answer", "object", "call"]


@dataclass(frozen=True)
class Gold:
    """What a reward compares a completion with, and how the probes use it (a kind's ``gold`` hook).

    ``shape``: ``answer`` — a final answer the probes write (with wrong ones beside it) in the answer layout;
    ``object`` — a JSON object (the probes also write it with one field wrong, or an invented field);
    ``call`` — the expected tool call (the agent probes call that function with wrong arguments, inside
    ``<think>``, with an undeclared argument). ``read``: the reward itself reads the column (False: the reward
    compares with no gold, and only the probes take the right answer from it — a judge, your own verifier)."""

    column: str
    shape: GoldShape = "answer"
    read: bool = True


@dataclass(frozen=True)
class Reason:
    """One reason id a reward logs per row (``<name>/why``): what it means and the spec field that changes that
    judgement (None: no field does — the reward is right, or only its own code can change it)."""

    text: str
    fix: str | None = None


# Reason ids the shared plumbing logs for every kind (templates/_common.py.j2 and the format gate); a kind's
# entry declares its own beside these (and may say `ok` in its own words).
COMMON_REASONS: dict[str, Reason] = {
    "ok": Reason("the reward passed these rows"),
    "error": Reason("scoring raised an error"),
    "format_failed": Reason("a format reward failed, so correctness scores 0 (format gate)",
                            "the format reward's pattern / trailing_text"),
    "unexplained": Reason("the reward logged no reason for these rows"),
}


def library_reasons(helper: str, fixes: Mapping[str, str | None] | None = None) -> dict[str, Reason]:
    """The reason ids a library reader (``rewards/lib/rewards_<helper>.py``, its ``REASONS``) logs, as Reasons
    with this kind's ``fixes``: a kind whose template calls that reader declares them with it."""
    import importlib

    module = importlib.import_module(f"finetune.rewards.lib.{HELPERS[helper][0][:-3]}")
    texts: dict[str, str] = module.REASONS
    unknown = sorted(set(fixes or {}) - set(texts))
    if unknown:
        raise RegistryError(f"fixes for reason ids the {helper} reader never logs: {', '.join(unknown)}",
                            where=f"rewards/lib/{HELPERS[helper][0]}", fix="fix the ids (its REASONS)")
    return {rid: Reason(text, (fixes or {}).get(rid)) for rid, text in texts.items()}


class PlanError(ValueError):
    """A cross-reward setting a kind's ``plan`` hook refuses: ``field`` of that reward, what, how to fix."""

    def __init__(self, field: str, what: str, fix: str) -> None:
        super().__init__(what)
        self.field, self.what, self.fix = field, what, fix


@dataclass(frozen=True)
class PlanContext:
    """What a kind's ``plan`` hook sees of the other rewards: the spec entries, every reward's
    :class:`~finetune.rewards.lib.rewards_meta.RewardMeta` as planned so far, the length-penalty floors the
    composite ordering allows, and the completion cap."""

    rewards: list[Any]
    metas: dict[str, RewardMeta]
    floors: dict[str, float]
    max_completion_length: int


def _gated_args(r: Any, meta: RewardMeta, planned: Mapping[str, Any]) -> tuple[Any, ...]:
    """The template's ``reward(r, gated)`` macro: gated on the format rewards or not."""
    return (meta.gated,)


# Hooks every entry must declare (no default): a kind that leaves one out is refused when it registers.
REQUIRED_HOOKS = ("order", "reading", "columns", "gold", "reasons", "fix")


@dataclass(frozen=True)
class Kind:
    """A reward kind: how it is specified, rendered, documented, probed and explained.

    Everything else in the package that varies by reward kind asks this entry (its hooks), never the
    ``type`` string: a new kind gets probes, gold controls, error paths and fixes from its entry alone."""

    type: str
    spec: builtins.type[Any]
    title: str
    # --- required hooks
    order: int  # its place in the render order (rewards.py's sections, the reference doc); unique
    reading: Callable[[Any], Reading]  # how it reads a completion (see Reading)
    columns: Callable[[Any], list[tuple[str, str]]]  # r -> [(spec field, dataset column)]: every column it reads
    gold: Callable[[Any, Any], Gold | None]  # (r, the spec's dataset section) -> its gold, or None: it has none
    reasons: Mapping[str, Reason]  # every reason id its rendered reward logs (beside COMMON_REASONS)
    fix: str  # what changes its judgement when no per-row reason does (`unexplained`, a reason with no fix)
    # --- rendering
    stdlib: tuple[str, ...] = ()  # standard-library modules its template uses (rewards.py imports them)
    imports: tuple[str, ...] = ()  # third-party modules its template uses
    packages: tuple[str, ...] = ()  # pip requirements of the rendered code
    helpers: tuple[str, ...] = ()  # keys of rewards.lib.HELPERS its template uses (as rewards_<key> modules)
    macro_args: Callable[[Any, RewardMeta, Mapping[str, Any]], tuple[Any, ...]] = _gated_args  # (r, its meta,
    # what its plan hook returned) -> the `reward` macro's arguments after r
    plan: Callable[[Any, PlanContext], dict[str, Any]] | None = None  # (r, context) -> RewardMeta fields it
    # sets (a floor, a threshold) and the macro's values; raises PlanError
    caches: tuple[str, ...] = ()  # module-level caches of its template that disable_caches() clears
    copies_verifier: bool = False  # the user's own file is copied beside rewards.py (rewards_user_<name>.py)
    needs_environment: bool = False  # the spec's `environment:` section must be present
    template_check: Callable[[Any, bool], tuple[str, str, str] | None] | None = None  # (r, chat template opens
    # <think>) -> (field, what is wrong, fix) when the model's chat template contradicts the entry
    second_verifier: Callable[[Any], Callable[[str, Mapping[str, Any]], bool | None]] | None = None  # r -> an
    # independent check of one completion against its row's columns (True: correct), implemented apart from
    # the kind's own reader; None: the kind declares none. The slot exists so a verifier lands in the kind's
    # folder; no reader consults it yet (the gate's choice of samples to read is the one it is meant for)
    # --- documentation and explanations
    notes: tuple[str, ...] = ()  # failure modes the code closes (its folder's notes.md, one bullet each)
    example: dict[str, Any] = field(default_factory=dict)  # one spec entry, rendered in the doc
    probes: tuple[str, ...] = ()  # the kind-specific probes it must withstand (reference doc)
    remedies: dict[str, str] = field(default_factory=dict)  # red flag -> this kind's remedy (inspect.flags)

    @property
    def template(self) -> str:
        """Its template's name in the render environment: ``kinds/<type>/template.py.j2``."""
        return f"{self.type}/template.py.j2"

    def reason(self, reason_id: str) -> Reason | None:
        """A reason id it logs (its own, else the shared plumbing's), or None when its entry does not declare it."""
        return self.reasons.get(reason_id) or COMMON_REASONS.get(reason_id)


# One entry per reward kind; in render order once finetune.rewards.kinds has imported every folder.
KINDS: dict[str, Kind] = {}

_Model = TypeVar("_Model", bound=type[BaseModel])


def _notes(model: type[BaseModel]) -> tuple[str, ...]:
    """The bullets of ``notes.md`` beside the model (each ``- `` line starts one; indented lines continue it)."""
    path = Path(sys.modules[model.__module__].__file__ or "").parent / "notes.md"
    if not path.is_file():
        return ()
    notes: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            notes.append(line[2:].strip())
        elif line.strip() and notes and line.startswith("  "):
            notes[-1] += " " + line.strip()
    return tuple(notes)


def kind(title: str, **entry: Any) -> Callable[[_Model], _Model]:
    """Register the decorated spec model as a reward kind (its ``type`` literal names it); ``entry``: the
    other :class:`Kind` fields, the :data:`REQUIRED_HOOKS` among them. The notes are read from ``notes.md`` in
    the model's folder. A second entry of one type or one order, one without a required hook, or a reason id
    that is not a word is refused when it registers (one line, :class:`~finetune.errors.RegistryError`)."""

    def register(model: _Model) -> _Model:
        spec: type[BaseModel] = model
        (name,) = typing.get_args(spec.model_fields["type"].annotation)
        where = f"rewards/kinds/{name}: {model.__name__}"
        missing = [h for h in REQUIRED_HOOKS if h not in entry]
        if missing:
            raise RegistryError(f"reward kind '{name}' lacks the hook(s) {', '.join(missing)}", where=where,
                                fix="declare them in its @kind(...) (see rewards.kind.Kind)")
        problem = _refusal(name, entry)
        if problem is not None:
            raise RegistryError(problem[0], where=where, fix=problem[1])
        KINDS[name] = Kind(name, model, title, **{"notes": _notes(model), **entry})
        return model

    return register


def _refusal(name: str, entry: dict[str, Any]) -> tuple[str, str] | None:
    """(what is wrong, fix) when ``entry`` cannot join the table beside the kinds already in it."""
    if name in KINDS:
        return f"reward kind '{name}' registered twice", "give the model a `type` literal no other kind uses"
    clash = next((k for k in KINDS.values() if k.order == entry["order"]), None)
    if clash is not None:
        return (f"reward kind '{name}' has the order {entry['order']} of '{clash.type}'",
                "choose an order no other kind uses (its place in rewards.py and the reference)")
    bad = [r for r in entry["reasons"] if not re.fullmatch(r"[a-z][a-z0-9_]*", r)]
    if bad:
        return f"reward kind '{name}' declares reason ids that are not lower_snake_case: {bad}", "rename them"
    unknown = [h for h in entry.get("helpers", ()) if h not in HELPERS]
    if unknown:
        return (f"reward kind '{name}' names unknown helpers {unknown}",
                f"use keys of rewards.lib.HELPERS ({', '.join(HELPERS)})")
    return None


def kind_of(reward: Any) -> Kind:
    """The registry entry of one spec entry (a reward model instance)."""
    return KINDS[reward.type]


def reading_of(reward: Any) -> Reading:
    """How ``reward`` (a spec entry) reads a completion: its kind's ``reading`` hook."""
    return kind_of(reward).reading(reward)


# ------------------------------------------------------------------------------ rendered module's names --

TEMPLATES = Path(__file__).resolve().parent / "templates"
KINDS_DIR = Path(__file__).resolve().parent / "kinds"
_TOP_LEVEL = re.compile(r"^(?:def |class )?([A-Za-z]\w*)\b(?:\s*=[^=]|\s*\()", re.M)


def rendered_names() -> set[str]:
    """Every module-level name a rendered rewards.py may bind besides its rewards: the modules it imports (the
    shared plumbing's and each kind's, from their entries), the helpers beside it (every ``rewards_*`` name: the
    renderer copies its helpers, your verifier and your environment as ``rewards_*.py``) and the public names
    its templates define. A reward named like one would be shadowed by it, or shadow it."""
    from finetune.rewards.lib import SHARED_STDLIB

    names = {"annotations", *SHARED_STDLIB}
    for entry in KINDS.values():
        names.update(m.split(".")[0] for m in (*entry.stdlib, *entry.imports))
    names.update(file[:-3] for file, _ in HELPERS.values())
    return names | _template_names(tuple(sorted(KINDS)))


@lru_cache(maxsize=4)
def _template_names(kinds: tuple[str, ...]) -> frozenset[str]:
    """The public top-level names the shared templates and these kinds' templates define (read once per table)."""
    paths = [*TEMPLATES.glob("*.py.j2"), *(KINDS_DIR / k / "template.py.j2" for k in kinds)]
    return frozenset(m.group(1) for p in paths if p.is_file()
                     for m in _TOP_LEVEL.finditer(p.read_text(encoding="utf-8")))


def reserved_name(name: str) -> bool:
    """A reward may not be named like a module-level name of the rendered rewards.py (:func:`rendered_names`),
    nor like a builtin — except ``format``, which the templates never call (a format reward may be named so)."""
    return (name.startswith("rewards_") or name in rendered_names()
            or (name in dir(builtins) and name != "format"))
