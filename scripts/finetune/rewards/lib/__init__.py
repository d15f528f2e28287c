"""The reward library's Python: real modules the renderer copies VERBATIM beside rewards.py as
``rewards_<what>.py`` helpers (the gate binds each by sha256). Stdlib-only unless a reward kind's
registry entry declares packages; a helper imports a sibling helper by plain name.

:data:`HELPERS` is their table: a kind's entry names the ones its template uses (``helpers=``); ``meta`` is
copied beside every rewards.py (its ``REWARD_META`` is built of :class:`rewards_meta.RewardMeta`)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

# helper name -> (file written beside rewards.py, source copied verbatim); the module is rewards.py's global
# of the file's name (rewards_answers, ...)
HELPERS: dict[str, tuple[str, Path]] = {
    "meta": ("rewards_meta.py", _HERE / "rewards_meta.py"),
    "answers": ("rewards_answers.py", _HERE / "rewards_answers.py"),
    "mathpool": ("rewards_mathpool.py", _HERE / "rewards_mathpool.py"),
    "code": ("rewards_code.py", _HERE / "rewards_code.py"),
    "jsonmatch": ("rewards_jsonmatch.py", _HERE / "rewards_jsonmatch.py"),
    "toolcall": ("rewards_toolcall.py", _HERE / "rewards_toolcall.py"),
    "sandbox": ("rewards_sandbox.py", _HERE.parents[1] / "sandbox" / "runner.py"),
}
ALWAYS = ("meta",)  # helpers every rendered rewards.py loads, whatever its kinds

# What the shared plumbing of every rendered rewards.py imports (templates/rewards.py.j2, _common.py.j2); a kind's
# template that uses a module declares it in its own entry (`stdlib=`), never relies on these.
SHARED_STDLIB = ("os", "sys", "warnings")
