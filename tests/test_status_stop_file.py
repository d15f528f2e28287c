"""`finetune diagnose` and `finetune status` read train/STOPPED.json with one reader (status.read_stop):
a stop file that does not parse, is not an object or names no rule is reported the same way by both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finetune import status

STOP_FILES = {  # what train/STOPPED.json holds -> the problem both commands report ("" when it is a real stop)
    "{not json": "train/STOPPED.json does not parse (invalid JSON",
    "[1, 2]": "train/STOPPED.json is not a JSON object (found list)",
    '{"step": 5, "reward": "right"}': "train/STOPPED.json names no rule",
    '{"rule": "  ", "step": 5}': "train/STOPPED.json names no rule",
    '{"rule": 7, "step": 5}': "train/STOPPED.json names no rule",
    "\udcff": "train/STOPPED.json does not parse (not UTF-8 text",
    '{"rule": "probe_passing", "step": 5, "reward": "right", "message": "a probe passes"}': "",
}


def _logged_run(run: Path, stop_text: str) -> None:
    """A run directory with 20 logged steps (a healthy-looking trainer_state.json) and the stop file."""
    (run / "train").mkdir(parents=True)
    history = [{"step": i, "reward": 0.1 + 0.01 * i, "reward_std": 0.2, "entropy": 1.0, "completion_length": 50.0,
                "kl": 0.01, "loss": 0.1} for i in range(1, 21)]
    (run / "train" / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": 20}))
    (run / "train" / "STOPPED.json").write_bytes(stop_text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("text", list(STOP_FILES))
def test_diagnose_reports_the_stop_file_as_status_does(cli, tmp_path, text):
    run = tmp_path / "run"
    _logged_run(run, text)
    r = cli("diagnose", run)
    assert r.code == 0, r
    said = json.loads((run / "diagnosis" / "diagnosis.json").read_text())["run"]["stopped"]
    shown = json.loads(cli("status", run, "--json").out)["stopped"]
    assert said["problem"].startswith(STOP_FILES[text]) and (said["problem"] == "") == (STOP_FILES[text] == "")
    assert "\n" not in said["problem"]
    # the same reading, field by field: status's JSON and diagnosis.json's run.stopped
    assert {k: said[k] for k in ("rule", "step", "reward", "message", "problem", "inspection_file")} == \
        {k: shown[k] for k in ("rule", "step", "reward", "message", "problem", "inspection_file")}
    assert said["file"] == str(run / status.STOPPED_FILE)


def test_no_stop_file_is_no_stop_in_either(cli, tmp_path):
    run = tmp_path / "run"
    _logged_run(run, "{}")
    (run / "train" / "STOPPED.json").unlink()
    assert cli("diagnose", run).code == 0
    assert json.loads((run / "diagnosis" / "diagnosis.json").read_text())["run"]["stopped"] is None
    assert json.loads(cli("status", run, "--json").out)["stopped"] is None

