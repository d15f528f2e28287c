"""The reward-kind registry: :data:`KINDS` (type → :class:`Kind`), the hooks an entry declares, and the
``@kind`` decorator that registers a spec model.

The entries themselves are declared on the spec models in :mod:`finetune.rewards.specs` (``@kind(...)`` on each
model; importing specs fills the table — :mod:`finetune.rewards.registry` does, before deriving the spec union).
Everything else in the package that varies by reward kind asks an entry's hooks (:func:`kind_of`,
:func:`reading_of`), never the reward's ``type`` string.
"""

from __future__ import annotations

import builtins
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from finetune.errors import RegistryError

# The answer containers a reader takes the final answer from (hedge / retraction probes and the expected-pass
# controls apply to rewards whose layout is one of these).
READING_STYLES = ("boxed", "answer_tag", "think_answer", "hash_answer")


@dataclass(frozen=True)
class CodeTests:
    """The unit-test columns a reward runs (code probes, the no_hidden_tests flag, the tests report)."""

    column: str
    format: str  # stdin_stdout | function_call | assert
    hidden: str | None = None  # tests never shown in the prompt
    entry_point: str | None = None  # column naming the function the tests call


@dataclass(frozen=True)
class Reading:
    """How a reward reads a completion: what the probes, flags and reading sheets need to know of it.

    Returned by each kind's ``reading`` hook for one spec entry; every field defaults to "none of this"."""

    style: str | None = None  # the answer layout it expects (inspect.probes.layouts); None: no opinion
    extract: str | None = None  # the extraction it claims (a pass with nothing there is flagged)
    gold: str | None = None  # the gold-answer column it compares with (probes, gold controls, the reader's sheet)
    reads_answer: bool = False  # reads the final answer: reading probes and expected-pass controls apply
    tests: CodeTests | None = None  # the unit tests it runs (code hack probes)
    expected_call: str | None = None  # the column holding the row's expected tool call (agent probes)
    agent: bool = False  # scores tool calls: the agent hack probes apply
    call_format: str | None = None  # the tool-call syntax it reads (agent probes write their calls in it)
    extra_keys_forbidden: bool = False  # an invented JSON key fails it (the invented-field probe applies)
    episode: bool = False  # scores the episode an environment ran (its calls replayed), not the completion's
    # text: the text-only controls (gold answer, well-formed vs malformed, length) carry no call, so the flags
    # read from them do not apply (inspect.flags.TEXT_ONLY)


class PlanError(ValueError):
    """A cross-reward setting a kind's ``plan`` hook refuses: ``field`` of that reward, what, how to fix."""

    def __init__(self, field: str, what: str, fix: str) -> None:
        super().__init__(what)
        self.field, self.what, self.fix = field, what, fix


def _gated_args(planned: Any) -> tuple[Any, ...]:
    """The template's ``reward(r, gated)`` macro: gated on the format rewards or not."""
    return (planned.gated,)


# Hooks every entry must declare (no default): a kind that leaves one out is refused when it registers.
REQUIRED_HOOKS = ("reading", "fix")


@dataclass(frozen=True)
class Kind:
    """A reward kind: how it is specified, rendered, documented, probed and explained.

    Everything else in the package that varies by reward kind asks this entry (its hooks), never the
    ``type`` string: a new kind gets probes, gold controls, error paths and fixes from its entry alone."""

    type: str
    spec: builtins.type[Any]
    title: str
    # --- required hooks
    reading: Callable[[Any], Reading]  # how it reads a completion (see Reading)
    fix: str  # what changes its judgement when no per-row reason does (a reason it does not log, `unexplained`)
    # --- rendering
    stdlib: tuple[str, ...] = ()  # modules the rendered per-kind code imports
    imports: tuple[str, ...] = ()  # third-party modules rewards.py imports for this kind
    packages: tuple[str, ...] = ()  # pip requirements of the rendered code
    helpers: tuple[str, ...] = ()  # keys of registry.HELPERS
    macro_args: Callable[[Any], tuple[Any, ...]] = _gated_args  # planned reward -> the `reward` macro's args after r
    plan: Callable[[Any, list[Any], dict[str, float], int], dict[str, Any]] | None = None  # (r, rewards, floors,
    # max_completion_length) -> _Planned fields to set; raises PlanError
    caches: tuple[str, ...] = ()  # module-level caches of its template that disable_caches() clears
    copies_verifier: bool = False  # the user's own file is copied beside rewards.py (rewards_user_<name>.py)
    needs_environment: bool = False  # the spec's `environment:` section must be present
    template_check: Callable[[Any, bool], tuple[str, str, str] | None] | None = None  # (r, chat template opens
    # <think>) -> (field, what is wrong, fix) when the model's chat template contradicts the entry
    # --- documentation and explanations
    notes: tuple[str, ...] = ()  # failure modes the code closes (reference doc)
    example: dict[str, Any] = field(default_factory=dict)  # one spec entry, rendered in the doc
    probes: tuple[str, ...] = ()  # the kind-specific probes it must withstand (reference doc)
    reason_text: dict[str, str] = field(default_factory=lambda: {"ok": "the reward passed these rows"})
    reason_fixes: dict[str, str] = field(default_factory=dict)  # reason id -> this kind's fix for it
    remedies: dict[str, str] = field(default_factory=dict)  # red flag -> this kind's remedy (inspect.flags)

    @property
    def template(self) -> str:
        return f"{self.type}.py.j2"


# One entry per reward kind, in render order: the order of the @kind-decorated models in specs.py.
KINDS: dict[str, Kind] = {}

_Model = TypeVar("_Model", bound=type[BaseModel])


def kind(title: str, **entry: Any) -> Callable[[_Model], _Model]:
    """Register the decorated spec model as a reward kind (its ``type`` literal names it); ``entry``: the
    other :class:`Kind` fields, the :data:`REQUIRED_HOOKS` among them. Adding a kind = one decorated model
    in specs.py + ``templates/<type>.py.j2``. A second entry of one type, or one without a required hook, is
    refused when it registers (one line, :class:`~finetune.errors.RegistryError`)."""

    def register(model: _Model) -> _Model:
        spec: type[BaseModel] = model
        (name,) = typing.get_args(spec.model_fields["type"].annotation)
        where = f"rewards/specs.py: {model.__name__}"
        if name in KINDS:
            raise RegistryError(f"reward kind '{name}' registered twice", where=where,
                                fix="give the model a `type` literal no other kind uses")
        missing = [h for h in REQUIRED_HOOKS if h not in entry]
        if missing:
            raise RegistryError(f"reward kind '{name}' lacks the hook(s) {', '.join(missing)}", where=where,
                                fix="declare them in its @kind(...) (see rewards.kinds.Kind)")
        KINDS[name] = Kind(name, model, title, **entry)
        return model

    return register


def kind_of(reward: Any) -> Kind:
    """The registry entry of one spec entry (a reward model instance)."""
    return KINDS[reward.type]


def reading_of(reward: Any) -> Reading:
    """How ``reward`` (a spec entry) reads a completion: its kind's ``reading`` hook."""
    return kind_of(reward).reading(reward)
