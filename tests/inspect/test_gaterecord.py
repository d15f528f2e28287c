"""gate.json as a versioned model: a record of another version asks for a new gate in one line."""

from __future__ import annotations

import json

import pytest

from finetune.errors import UserError
from finetune.inspect.gaterecord import SCHEMA_VERSION, GateRecord, load_record, old_schema, parse_record


def test_a_record_round_trips_and_another_version_is_one_line(tmp_path):
    record = GateRecord(status="FAIL", reasons=["the re-score could not run"], time="2026-01-01T00:00:00+00:00")
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(record.dump()))
    assert load_record(path) == record and record.schema_version == SCHEMA_VERSION
    for data in ({**record.dump(), "schema_version": 1}, {k: v for k, v in record.dump().items()
                                                          if k != "schema_version"}):
        stale = old_schema(data)
        assert stale and "run `finetune inspect gate` again" in stale and "\n" not in stale
        with pytest.raises(UserError, match="schema version|no schema version"):
            parse_record(data, "gate.json")
    with pytest.raises(UserError, match="status"):
        parse_record({**record.dump(), "status": "pass"}, "gate.json")
    with pytest.raises(UserError, match="counts_by_hand: Extra inputs"):
        parse_record({**record.dump(), "counts_by_hand": 1}, "gate.json")
    assert old_schema([1]) is None and old_schema(record.dump()) is None
