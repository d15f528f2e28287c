"""Number types for every boundary: spec fields and CLI options (issue 18 item 6).

``float("inf")``, ``float("nan")`` and YAML's ``.inf`` are floats to Python and to pydantic's plain
``float``; rendered into train.py they become ``inf`` (a NameError on the GPU box). Every float a user
can give goes through :data:`FiniteFloat` (spec models: ``allow_inf_nan=False`` in their config, which is
the same check) or :func:`real` (CLI options), and every count through :func:`count`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Annotated

from pydantic import AllowInfNan, ConfigDict

FiniteFloat = Annotated[float, AllowInfNan(False)]

# The pydantic config every user-facing model uses: unknown keys refused, NaN/±inf refused.
STRICT_MODEL = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


def count(minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in [minimum, maximum]; anything else → one-line usage error (exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"{value} is out of range: must be {bound}")
        return value

    parse.__name__ = "count"
    return parse


def real(minimum: float | None = None, maximum: float | None = None, *, above: bool = False
         ) -> Callable[[str], float]:
    """argparse type: a finite float ≥ minimum (> minimum when ``above``) and ≤ maximum."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        low_bad = minimum is not None and (value <= minimum if above else value < minimum)
        if low_bad or (maximum is not None and value > maximum):
            low = f"{'>' if above else '≥'} {minimum:g}" if minimum is not None else ""
            high = f"≤ {maximum:g}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(
                f"{value:g} is out of range: must be {' and '.join(filter(None, (low, high)))}")
        return value

    parse.__name__ = "real"
    return parse
