"""watch.tracker_note: the inspection's stops, live red flags and the gate's summary go to whichever tracker holds a
run in the process (Trackio or W&B, as transformers' callback started it), never importing one and never stopping
training on a tracker's error."""

from __future__ import annotations

import sys
import types

from finetune import watch


def _fake(name: str, active: bool, fail: bool = False):
    calls: list[tuple] = []
    mod = types.ModuleType(name)
    mod.AlertLevel = types.SimpleNamespace(INFO="info", WARN="warn", ERROR="error")
    mod.config = types.SimpleNamespace(update=lambda d, allow_val_change: calls.append(("config", dict(d))))

    def alert(title, text, level):
        if fail:
            raise RuntimeError("tracker down")
        calls.append(("alert", title, text, level))

    mod.alert = alert
    if name == "trackio":
        mod.context_vars = types.SimpleNamespace(current_run=types.SimpleNamespace(get=lambda: object() if active
                                                                                      else None))
    else:
        mod.run = object() if active else None
    return mod, calls


def test_a_note_goes_to_the_active_tracker_only(monkeypatch):
    trackio, t_calls = _fake("trackio", active=False)
    wandb, w_calls = _fake("wandb", active=True)
    monkeypatch.setitem(sys.modules, "trackio", trackio)
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    assert watch.tracker_note("gate PASS", "{}", "info", config={"gate/status": "PASS"})
    assert t_calls == [] and w_calls == [("config", {"gate/status": "PASS"}), ("alert", "gate PASS", "{}", "info")]


def test_no_tracker_or_a_failing_one_is_no_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "trackio", raising=False)
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    assert not watch.tracker_note("x", "y")
    assert "trackio" not in sys.modules and "wandb" not in sys.modules  # never imported by the note
    trackio, _ = _fake("trackio", active=True, fail=True)
    monkeypatch.setitem(sys.modules, "trackio", trackio)
    assert not watch.tracker_note("x", "y")


def test_stops_and_each_new_flag_are_sent_once(monkeypatch):
    trackio, calls = _fake("trackio", active=True)
    monkeypatch.setitem(sys.modules, "trackio", trackio)
    seen: set[str] = set()
    stop = {"rule": "probe_passing", "message": "2 completion(s) shaped like the 'empty_completion' probe pass c"}
    flag = {"id": "truncated", "count": 9}
    watch._tracked(seen, [stop], [flag], 10)
    watch._tracked(seen, [], [flag], 15)
    alerts = [c for c in calls if c[0] == "alert"]
    assert [(a[1], a[3]) for a in alerts] == [("inspection stopped the run: probe_passing", "error"),
                                             ("live red flag: truncated", "warn")]
