"""argparse types for every numeric CLI option: a bad number is a one-line usage error (exit 2), never a
traceback, and never ``inf`` / ``nan`` (which would reach rendered code as a NameError on the GPU box)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


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
