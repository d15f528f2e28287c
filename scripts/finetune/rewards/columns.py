"""Phase 1 refuses inputs that cannot work: every column a reward reads, and the
prompt column, must exist in the dataset and in the samples — else exit 2 naming the column and the
columns that exist, before anything is written. A typo must never read as "the base model never
succeeds" (which routes the user to SFT)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec


def reward_columns(spec: RunSpec) -> list[tuple[str, str]]:
    """(column, spec field) for every dataset column a reward of ``spec`` reads, in spec order: what its kind's
    ``columns`` hook declares (never read off the fields' names)."""
    from finetune.rewards.kind import kind_of

    return [(column, f"rewards[{index}].{field}") for index, reward in enumerate(spec.rewards)
            for field, column in kind_of(reward).columns(reward)]


def _refuse(column: str, field: str, present: Iterable[str], where: str, what: str) -> UserError:
    present = sorted(present)
    return UserError(f"{field}: column '{column}' is not in the {what} (columns: {', '.join(present) or 'none'})",
                     where=where, fix=f"set {field} to one of the existing columns, or add '{column}' to the {what}")


def check_dataset(spec: RunSpec, *, required: bool = True) -> None:
    """The dataset has the prompt column and every reward column. With ``required=False`` a dataset
    that is not on this machine is not checked (rendering rewards does not need it)."""
    from finetune.dataset import load_rows

    if not required and not spec.resolve_path(spec.dataset.path).exists():
        return
    rows = load_rows(spec)  # refuses a missing prompt column itself
    present = set(rows[0])
    where = str(spec.resolve_path(spec.dataset.path))
    for column, field in reward_columns(spec):
        if column not in present:
            raise _refuse(column, field, present, where, "dataset")


def check_samples(spec: RunSpec, samples: list[dict[str, Any]], where: str) -> None:
    """Every sample carries every reward column (samples keep the dataset's columns under ``columns``)."""
    for column, field in reward_columns(spec):
        for s in samples:
            columns = s.get("columns") or {}
            if column not in columns:
                raise _refuse(column, field, columns, f"{where} (sample '{s.get('id')}')", "samples")
