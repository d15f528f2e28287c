"""`finetune diagnose PROJECT.db`: a Trackio project's local database read as the training log. A real TRL log
history logged through the real trackio as transformers' TrackioCallback logs it (train/ prefixes, global step, an
alert) is diagnosed exactly as its trainer_state.json is; the diagnosis says where it was read from and licenses no
config change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finetune import rundir
from finetune.config.build import _load_diagnosis
from finetune.diagnose import trackiodb

STATE = Path(__file__).resolve().parent / "data" / "stale_weights" / "stale" / "trainer_state.json"

# as transformers.integrations.TrackioCallback.on_log logs each entry (rewrite_logs + train/global_step)
REPLAY = """
import json, sys
import trackio
from transformers.integrations.integration_utils import rewrite_logs
history = json.load(open(sys.argv[1]))["log_history"]
for name in ("first", "second"):
    trackio.init(project="finetune-demo", name=name)
    for entry in history:
        logs = {k: v for k, v in entry.items() if k not in ("train_runtime", "train_samples_per_second",
                "train_steps_per_second", "train_loss", "total_flos")}
        trackio.log({**rewrite_logs(logs), "train/global_step": entry["step"]})
    trackio.alert(title="inspection stopped the run: reward_divergence", text="step 12: why")
    trackio.finish()
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trackio")
    env = {**os.environ, "TRACKIO_DIR": str(folder), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", REPLAY, str(STATE)], env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "finetune-demo.db"


@pytest.mark.slow
def test_a_trackio_database_diagnoses_as_its_trainer_state_does(project, tmp_path, cli):
    assert trackiodb.is_db(project) and trackiodb.runs(project) == ["first", "second"]
    r = cli("diagnose", STATE, "-o", tmp_path / "state")
    assert r.code == 0, r
    r = cli("diagnose", project, "-o", tmp_path / "tracked")
    assert r.code == 0, r
    state = json.loads((tmp_path / "state" / rundir.DIAGNOSIS).read_text())
    tracked = json.loads((tmp_path / "tracked" / rundir.DIAGNOSIS).read_text())
    for key in ("verdict", "recommended_variant", "recommended_change"):
        assert tracked[key] == state[key], key
    assert [s["name"] for s in tracked["symptoms"]] == [s["name"] for s in state["symptoms"]]
    assert tracked["run"]["logged_steps"] == state["run"]["logged_steps"]
    assert tracked["run"]["log_kind"] == "trackio" and tracked["run"]["licenses"] is False
    assert state["run"]["licenses"] is True
    assert trackiodb.NOT_A_LICENCE in tracked["caveats"] and trackiodb.NOT_A_LICENCE in r.out
    # config render takes no symptom or healthy verdict from it
    (tmp_path / "run" / "diagnosis").mkdir(parents=True)
    (tmp_path / "run" / rundir.DIAGNOSIS).write_text(json.dumps(tracked))
    assert _load_diagnosis(tmp_path / "run")["symptoms"] == []


@pytest.mark.slow
def test_runs_and_alerts_are_read_and_a_wrong_name_is_one_line(project, cli, tmp_path):
    rows, notes = trackiodb.read(project, "first")
    assert rows and all("global_step" not in r and not any(k.startswith("train/") for k in r) for r in rows)
    assert any("reward_divergence" in n for n in notes) and notes[0].startswith("Trackio run 'first'")
    r = cli("diagnose", project, "--trackio-run", "third", "-o", tmp_path)
    assert r.code == 2 and "no run 'third'" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("diagnose", STATE, "--trackio-run", "first", "-o", tmp_path)
    assert r.code == 2 and "not one" in r.err


def test_a_file_that_is_not_a_trackio_database_is_one_line(tmp_path, cli):
    import sqlite3

    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    r = cli("diagnose", db, "-o", tmp_path / "out")
    assert r.code == 2 and "not a Trackio project database" in r.err and len(r.err.strip().splitlines()) == 1
