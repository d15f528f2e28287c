"""How a person or an agent runs this CLI here: the console script of the environment it is installed in.

Review sheets, READMEs and hints print commands the reader can paste. A bare ``finetune`` works only
when that environment's bin/ is on PATH; the plugin installs into ``${CLAUDE_PLUGIN_DATA}/venv``, which
is not. So printed commands name the console script next to the running interpreter (or
``python -m finetune`` with that interpreter), shell-quoted.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def runnable() -> str:
    """The shell words that run `finetune` in this environment (quoted)."""
    script = Path(sys.executable).parent / "finetune"
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m finetune"


def command(*args: object) -> str:
    """A pasteable `finetune ARGS...` line (every argument shell-quoted)."""
    return " ".join([runnable(), *(shlex.quote(str(a)) for a in args)])
