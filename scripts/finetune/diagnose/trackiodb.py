"""A Trackio project's local database read as a training log (``finetune diagnose PROJECT.db``).

Trackio (local-first experiment tracking; the rendered train.py logs there when it is installed) keeps a project in
one SQLite file, ``$TRACKIO_DIR/<project>.db``: a ``metrics`` table with one row per logged step (``run_name``,
``step``, ``metrics`` as JSON; non-finite values written as the strings "NaN" / "Infinity" / "-Infinity") and an
``alerts`` table. It is read here with the standard library's sqlite3, read-only, without importing trackio (a
database copied back from a training machine needs no trackio here). transformers' TrackioCallback logs each of
TRL's metrics under ``train/`` with ``train/global_step``; both prefixes are undone so the rows read as TRL's log.

A diagnosis read from it is reported but never licenses a config change: only the run's own train/ logs do
(diagnosis.json ``run.licenses`` is false; ``config render`` takes no symptom or healthy verdict from it).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from finetune.errors import UserError

SQLITE_MAGIC = b"SQLite format 3\x00"
PREFIX = "train/"
STEP_KEY = "train/global_step"
NOT_A_LICENCE = ("read from a Trackio project (its local database): reported only — it never licenses a config "
                 "change (only the run's own train/ logs do)")


def is_db(path: Path) -> bool:
    """Is ``path`` an SQLite file (a Trackio project's database)?"""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("SELECT run_name, step, metrics FROM metrics LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise UserError(f"not a Trackio project database ({exc})", where=str(path),
                        fix="pass the project's <project>.db from TRACKIO_DIR (train/trackio/ in the run directory)"
                        ) from None
    return conn


def runs(path: Path) -> list[str]:
    """The project's runs, oldest first (by their first logged row)."""
    with _connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT run_name, MIN(id) AS first FROM metrics GROUP BY run_name "
                                           "ORDER BY first")]


def _row(raw: str, step: int, where: str) -> dict[str, Any]:
    try:
        metrics = json.loads(raw)
    except (ValueError, RecursionError):
        raise UserError("a logged row is not JSON", where=where, fix="pass an intact Trackio database") from None
    if not isinstance(metrics, dict):
        raise UserError("a logged row is not a JSON object", where=where, fix="pass an intact Trackio database")
    out: dict[str, Any] = {k[len(PREFIX):] if k.startswith(PREFIX) else k: v for k, v in metrics.items()
                           if k != STEP_KEY}
    out["step"] = metrics.get(STEP_KEY, step)
    return out


def read(path: Path, run: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(the logged rows of one run as TRL logged them, notes): ``run`` by name, else the project's newest run."""
    names = runs(path)
    if not names:
        raise UserError("the Trackio project has no logged rows", where=str(path),
                        fix="pass the database of a project a run logged to")
    chosen = run if run is not None else names[-1]
    if chosen not in names:
        raise UserError(f"no run {chosen!r} in this Trackio project (runs: {', '.join(names)})", where=str(path),
                        fix="name one of its runs with --trackio-run")
    with _connect(path) as conn:
        got = conn.execute("SELECT id, step, metrics FROM metrics WHERE run_name = ? ORDER BY id", (chosen,))
        rows = [_row(raw, int(step), f"{path}: metrics row {rid}") for rid, step, raw in got]
        alerts = conn.execute("SELECT title, text, level, step FROM alerts WHERE run_name = ? ORDER BY id",
                              (chosen,)).fetchall() if _has_alerts(conn) else []
    notes = [f"Trackio run {chosen!r} ({len(names)} run(s) in the project)", NOT_A_LICENCE]
    notes += [f"Trackio alert ({level}) at step {step}: {title}" + (f" — {text}" if text else "")
              for title, text, level, step in alerts]
    return rows, notes


def _has_alerts(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alerts'").fetchone() is not None
