"""Number types for spec fields; the CLI's counterpart is finetune/cli/argtypes.py.

``float("inf")``, ``float("nan")`` and YAML's ``.inf`` are floats to Python and to pydantic's plain
``float``; rendered into train.py they become ``inf`` (a NameError on the GPU box). Every float a user
can give goes through :data:`FiniteFloat` (spec models: ``allow_inf_nan=False`` in their config, which is
the same check) or ``finetune.cli.argtypes.real`` (CLI options), and every CLI count through ``count``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AllowInfNan, ConfigDict

FiniteFloat = Annotated[float, AllowInfNan(False)]

# The pydantic config every user-facing model uses: unknown keys refused, NaN/±inf refused.
STRICT_MODEL = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)
