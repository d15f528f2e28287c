"""The training dataset's rows: the one loader every reader of the run spec's dataset uses.

`inspect sample` (and its remote form), `rewards` column checks, `data filter` and `config render` all read the
same rows the same way, so a dataset one of them accepts is never refused (or misread) by another. Formats are the
spec's ``dataset.format``: ``jsonl`` (one JSON object per line), ``parquet``, ``hf_disk`` (a
``datasets.save_to_disk`` folder; ``dataset.split`` picks the split), ``auto`` deciding from the path. Bad input is
one line naming the file (what, where, how to fix), exit 2: a missing file, a line that is not a JSON object, a
missing split, an empty dataset, a missing prompt column.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio
from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec


def data_format(spec: RunSpec, path: Path) -> str:
    """``dataset.format``, or for ``auto`` the format the path says: folder → hf_disk, .parquet → parquet, else
    jsonl."""
    fmt = spec.dataset.format
    if fmt == "auto":
        fmt = "hf_disk" if path.is_dir() else "parquet" if path.suffix == ".parquet" else "jsonl"
    return fmt


def dataset_file(spec: RunSpec, *, training: bool = False) -> tuple[Path, str]:
    """(the file, the spec field naming it). ``training``: the file train.py trains on — the filtered file once
    `finetune data filter` set ``dataset.filter`` — else ``dataset.path`` (what sampling and the filter read)."""
    if training and spec.dataset.filter is not None:
        return spec.training_data_path(), "dataset.filter.path"
    return spec.resolve_path(spec.dataset.path), "dataset.path"


def load_rows(spec: RunSpec, *, training: bool = False) -> list[dict[str, Any]]:
    """Every row of the dataset (see :func:`dataset_file` for ``training``), each a dict, at least one, every
    row's first keys including the prompt column; anything else is a UserError naming the file."""
    path, field = dataset_file(spec, training=training)
    return load_file_rows(spec, path, field)


def load_file_rows(spec: RunSpec, path: Path, field: str) -> list[dict[str, Any]]:
    """The rows of ``path`` read as the spec reads its dataset (``field``: the spec field naming the file)."""
    if not path.exists():
        raise UserError(f"dataset not found: {path}", where=field, fix="point it at the training data")
    fmt = data_format(spec, path)
    rows = _jsonl_rows(path) if fmt == "jsonl" else _parquet_rows(path) if fmt == "parquet" \
        else _disk_rows(path, spec.dataset.split)
    if not rows:
        raise UserError(f"the dataset is empty (no rows): {path}", where=field,
                        fix="point it at a file with at least one row of training data")
    prompt = spec.dataset.prompt_column
    if prompt not in rows[0]:
        raise UserError(f"column '{prompt}' not in the dataset {path} (columns: {sorted(rows[0])})",
                        where="dataset.prompt_column", fix="name the prompt column")
    return rows


def _jsonl_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, obj in jsonio.read_jsonl(path, fix="one JSON object per line"):
        if not isinstance(obj, dict):
            raise UserError(f"expected a JSON object, found {type(obj).__name__}", where=f"{path}:{n}",
                            fix="one JSON object per line")
        rows.append(obj)
    return rows


def _parquet_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def _disk_rows(path: Path, split: str) -> list[dict[str, Any]]:
    from datasets import DatasetDict, load_from_disk

    try:
        ds = load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001 - datasets fails in many ways (a save of no rows: IndexError)
        raise UserError(f"cannot read {path} as a datasets.save_to_disk folder, or it holds no rows "
                        f"({type(exc).__name__}: {str(exc)[:120]})", where="dataset.path",
                        fix="save at least one row with save_to_disk, or export the split to .jsonl") from None
    if isinstance(ds, DatasetDict):
        if split not in ds:
            raise UserError(f"split '{split}' not in {sorted(ds)}", where="dataset.split", fix="name a split")
        ds = ds[split]
    rows: list[dict[str, Any]] = ds.to_list()
    return rows
