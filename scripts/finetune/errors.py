"""The two ways a stage stops early, mapped to exit codes by :mod:`finetune.cli`.

* :class:`UserError` — bad input (exit 2): one line saying what is wrong, where (file:line or a
  field path) and how to fix it. Raised before anything is written.
* :class:`RegistryError` — a registry entry of the package is incomplete (exit 2, one line): the
  extension point refuses it when the registry is built, naming the entry and what it lacks.
* :class:`CheckFailed` — the input was fine but a check did not pass (exit 1): lint findings,
  a gate FAIL, a refused render.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input. The message is printed as a single line; keep it actionable."""

    def __init__(self, what: str, where: str | None = None, fix: str | None = None):
        self.what, self.where, self.fix = what, where, fix
        super().__init__(self.line())

    def line(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return " — ".join(parts).replace("\n", " ")


class RegistryError(UserError, ValueError):
    """An entry of one of the package's registries (a GPU profile, a reward kind) is incomplete or invalid: the
    package itself is broken, so the command refuses it in one line naming the entry, the field and the fix."""


class CheckFailed(Exception):
    """A check ran and failed (exit 1). The message summarises; details were already printed."""
