"""Printed commands name the console script of this environment, so they run as printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from finetune import __version__
from finetune.invocation import command, runnable


def test_runnable_is_this_environments_console_script():
    assert runnable().startswith(str(Path(sys.executable).parent)) and runnable().endswith("finetune")
    done = subprocess.run(["bash", "-c", f"{runnable()} --version"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin"})  # not on PATH: the printed line still runs
    assert done.returncode == 0 and __version__ in done.stdout, done.stderr


def test_command_quotes_every_argument():
    line = command("inspect", "review", "runs/it's mine", "--format", "md")
    assert line == f"{runnable()} inspect review 'runs/it'\"'\"'s mine' --format md"
