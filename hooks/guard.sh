#!/bin/sh
# llm-finetuning's PreToolUse guard (hooks/hooks.json): runs hooks/guard.py with the system's python3 in isolated
# mode (-I: no user site, no PYTHON* variables, no script folder on the path), not the plugin's venv, so it works
# before the bootstrap and after a broken one. No python3 is a refusal (exit 2), never a silent pass.
here=$(dirname -- "$0")
if ! command -v python3 >/dev/null 2>&1; then
  echo "llm-finetuning guard: python3 is not on PATH, so no tool call can be checked; every call is refused until it is installed" >&2
  exit 2
fi
exec python3 -I "$here/guard.py"
