"""finetune.dataset: the one loader of the training data. Every reader (inspect sample, config render, rewards
render's column check, data filter) refuses a bad dataset with the same one line naming the file, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from finetune.dataset import load_rows
from finetune.errors import UserError
from finetune.spec import load_spec

SPEC = """name: empty-data
model: Qwen/Qwen3-1.7B
dataset: {{path: {path}, prompt_column: prompt, answer_column: answer}}
rewards:
  - {{name: correct, type: exact_match, answer_column: answer, extract: answer_tag, weight: 1.0}}
hardware: {{profile: h100-80gb, gpus: 1, nodes: 1}}
"""


def _spec(folder: Path, data: str) -> Path:
    path = folder / "spec.yaml"
    path.write_text(SPEC.format(path=data), encoding="utf-8")
    return path


def _empty_parquet(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": pa.array([], pa.string()), "answer": pa.array([], pa.string())}), path)


@pytest.mark.parametrize("name", ["train.jsonl", "train.parquet"])
def test_an_empty_dataset_is_one_line_naming_the_file(tmp_path, name):
    data = tmp_path / name
    _empty_parquet(data) if name.endswith(".parquet") else data.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_rows(load_spec(_spec(tmp_path, name)))
    assert err.value.where == "dataset.path" and str(data) in err.value.what and "\n" not in err.value.line()


def test_an_empty_save_to_disk_split_is_refused(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"prompt": [], "answer": []}).save_to_disk(str(tmp_path / "train"))
    with pytest.raises(UserError, match="holds no rows") as err:  # datasets itself fails on a save of no rows
        load_rows(load_spec(_spec(tmp_path, "train")))
    assert str(tmp_path / "train") in err.value.what and "\n" not in err.value.line()


def test_a_line_that_is_not_an_object_names_its_line(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1", "answer": "2"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(UserError, match="expected a JSON object") as err:
        load_rows(load_spec(_spec(tmp_path, "train.jsonl")))
    assert err.value.where == f"{tmp_path / 'train.jsonl'}:2"


def test_the_training_file_is_the_filtered_one_once_a_filter_is_set(tmp_path):
    """config render measures what train.py trains on: an empty filtered file is refused under its own field."""
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1", "answer": "2"}\n', encoding="utf-8")
    spec = load_spec(_spec(tmp_path, "train.jsonl"))
    assert [r["prompt"] for r in load_rows(spec, training=True)] == ["1+1"]  # no filter: the dataset itself
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "filtered.jsonl").write_text("", encoding="utf-8")
    filtered = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"filter": _filter_record()})})
    with pytest.raises(UserError, match="the dataset is empty") as err:
        load_rows(filtered, training=True)
    assert err.value.where == "dataset.filter.path" and "filtered.jsonl" in err.value.what
    assert len(load_rows(filtered)) == 1  # the readers of the source data still read dataset.path


def _filter_record():
    from finetune.spec import DataFilterSpec

    return DataFilterSpec(path="data/filtered.jsonl", source="train.jsonl", k=4, keep=[0.1, 0.9], max_prompts=1,
                          rows=1, pass_rates="data/pass_rates.jsonl", sha256="0" * 64, source_rows=1,
                          predicted_frac_reward_zero_std=[0.5, 0.1])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "scripts"))
    return subprocess.run([sys.executable, "-m", "finetune", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow  # three CLI processes, each importing the renderer or the sampler
def test_every_reader_refuses_an_empty_dataset_the_same_way(tmp_path):
    """inspect sample, config render (its length statistics) and rewards render (its column check) read the
    training data: each refuses the empty file with the same single line, exit 2, and writes nothing."""
    (tmp_path / "train.jsonl").write_text("", encoding="utf-8")
    spec = _spec(tmp_path, "train.jsonl")
    before = sorted(p.name for p in tmp_path.iterdir())
    runs = {"inspect sample": _cli("inspect", "sample", str(spec)),
            "config render": _cli("config", "render", str(spec), "--preview"),
            "rewards render": _cli("rewards", "render", str(spec))}
    lines = {}
    for reader, proc in runs.items():
        assert proc.returncode == 2, (reader, proc.stdout, proc.stderr)
        err = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(err) == 1 and "Traceback" not in proc.stderr, (reader, proc.stderr)
        lines[reader] = err[0]
    assert len(set(lines.values())) == 1, lines
    assert str(tmp_path / "train.jsonl") in lines["inspect sample"] and "empty" in lines["inspect sample"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_no_reader_parses_the_training_data_itself():
    """The readers call finetune.dataset.load_rows: none of them reads dataset.path's formats on its own."""
    package = Path(__file__).resolve().parents[1] / "scripts" / "finetune"
    readers = [package / "config" / "dataset.py", package / "inspect" / "sample.py", package / "inspect" /
               "sample_remote.py", package / "rewards" / "columns.py", package / "datafilter.py"]
    for path in readers:
        text = path.read_text(encoding="utf-8")
        assert "load_rows(spec" in text, path
        assert "load_from_disk" not in text and "spec.dataset.format" not in text, path
