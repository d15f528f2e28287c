"""A user verifier for `type: python`: does the completion's SQL query return the expected rows?

The row's `schema` column holds the CREATE/INSERT statements of a small database; `expected` holds
the rows the right query returns (a JSON list of lists). The query runs on a fresh in-memory SQLite
database, read-only by construction (a new database per call), with a step budget so a runaway query
stops. Order matters only when the expected rows say so ("ordered": true in the column).
"""

from __future__ import annotations

import json
import re
import sqlite3

_FENCE = re.compile(r"```(?:sql)?\s*\n(.*?)```", re.S | re.I)
STEP_BUDGET = 200_000  # SQLite VM steps before a query is abandoned


def _query(completion: str) -> str | None:
    """The last ```sql fenced block, else None (no query, no credit)."""
    blocks = _FENCE.findall(completion)
    return blocks[-1].strip().rstrip(";") if blocks else None


def sql_result_matches(completion: str, prompt: str = "", schema: str = "", expected=None, **_: object) -> float | None:
    """1.0 when the query's rows equal the expected rows, 0.0 otherwise, None when the row has no expectation."""
    if not schema or expected is None:
        return None
    want = json.loads(expected) if isinstance(expected, str) else expected
    ordered = isinstance(want, dict) and bool(want.get("ordered"))
    rows_wanted = want["rows"] if isinstance(want, dict) else want
    query = _query(completion)
    if not query or ";" in query:
        return 0.0  # one statement only
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(schema)
        steps = [0]

        def budget() -> int:
            steps[0] += 1
            return 1 if steps[0] > STEP_BUDGET // 1000 else 0

        db.set_progress_handler(budget, 1000)
        got = [list(r) for r in db.execute(query).fetchall()]
    except sqlite3.Error:
        return 0.0
    finally:
        db.close()
    want_rows = [list(r) for r in rows_wanted]
    if not ordered:
        got, want_rows = sorted(map(repr, got)), sorted(map(repr, want_rows))
    return 1.0 if got == want_rows else 0.0
