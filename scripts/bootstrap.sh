#!/usr/bin/env bash
# First-run bootstrap for Claude Code users: installs the plugin's scripts (the `finetune` CLI) and
# their pinned dependencies into a virtual environment under ${CLAUDE_PLUGIN_DATA}/venv — never
# inside the plugin folder, which every plugin update replaces. Nothing is written to the plugin
# folder: the package is copied out to ${CLAUDE_PLUGIN_DATA}/src and installed from there.
#
# Idempotent. Two stamps in the venv say what is installed:
#   .deps-<sha256 of pyproject.toml>   the pinned dependencies (torch==2.13.0 first, then the rest)
#   .src-<sha256 of scripts/finetune>  the package itself (a plugin update that changes only code
#                                      reinstalls it alone, without touching the dependencies)
# A second run with both stamps present does nothing and says so.
#
#   scripts/bootstrap.sh [DATA_DIR]            install or update, reporting each step
#   scripts/bootstrap.sh [DATA_DIR] --dry-run  print what it would run, change nothing
#   scripts/bootstrap.sh [DATA_DIR] --train    also the [train] extra (vLLM, DeepSpeed) on a GPU training box;
#                                              stamp .train-<sha256 of pyproject.toml>; then `finetune env check RUN`
# DATA_DIR defaults to $CLAUDE_PLUGIN_DATA (commands pass "${CLAUDE_PLUGIN_DATA}", which Claude Code
# substitutes, so the script works whether or not the variable is exported to the shell).
# Exit: 0 ok (or up to date), 2 bad setup (no data folder, or one inside the plugin), else pip's code.
set -euo pipefail

DRY_RUN=0
TRAIN=0
DATA_ARG=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --train) TRAIN=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "bootstrap: unknown option '$arg' — fix: use --dry-run / --train, or pass only the data folder" >&2; exit 2 ;;
    *)
      if [ -n "$DATA_ARG" ]; then
        echo "bootstrap: more than one data folder ('$DATA_ARG', '$arg') — fix: pass one" >&2; exit 2
      fi
      DATA_ARG="$arg" ;;
  esac
done
if [ -n "$DATA_ARG" ]; then CLAUDE_PLUGIN_DATA="$DATA_ARG"; fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "bootstrap: $PYTHON not found — fix: install Python >= 3.10 or set PYTHON=/path/to/python3" >&2
  exit 2
fi
ROOT="${CLAUDE_PLUGIN_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
if [ -z "${CLAUDE_PLUGIN_DATA:-}" ]; then
  echo "bootstrap: no data folder: CLAUDE_PLUGIN_DATA is not set and none was given — fix: pass \"\${CLAUDE_PLUGIN_DATA}\" (a folder outside the plugin)" >&2
  exit 2
fi
# Resolved paths and the two content hashes, computed by Python (portable: no GNU-only tools).
{ read -r ROOT; read -r DATA; read -r deps_hash; read -r src_hash; } < <("$PYTHON" - "$ROOT" "$CLAUDE_PLUGIN_DATA" <<'PY'
import hashlib, os, sys
root, data = (os.path.realpath(p) for p in sys.argv[1:3])
deps = hashlib.sha256(open(os.path.join(root, "pyproject.toml"), "rb").read()).hexdigest()[:16]
h = hashlib.sha256()
pkg = os.path.join(root, "scripts", "finetune")
for d, dirs, files in sorted(os.walk(pkg)):
    dirs[:] = sorted(x for x in dirs if x != "__pycache__")
    for f in sorted(files):
        if not f.endswith(".pyc"):
            path = os.path.join(d, f)
            h.update(os.path.relpath(path, pkg).encode() + b"\0" + open(path, "rb").read() + b"\0")
print(root, data, deps, h.hexdigest()[:16], sep="\n")
PY
)
case "$DATA/" in
  "$ROOT/"*)
    echo "bootstrap: CLAUDE_PLUGIN_DATA ($DATA) is inside the plugin folder ($ROOT), which updates replace — fix: point it outside" >&2
    exit 2 ;;
esac

VENV="$DATA/venv"
SRC="$DATA/src"
TORCH_PIN="torch==2.13.0"  # DESIGN.md's pins contract; installed first so pip never picks another torch build
DEPS_STAMP="$VENV/.deps-$deps_hash"
SRC_STAMP="$VENV/.src-$src_hash"
TRAIN_STAMP="$VENV/.train-$deps_hash"
EXTRA=""
TRAIN_OK=1
if [ "$TRAIN" = 1 ]; then
  EXTRA="[train]"  # vLLM + DeepSpeed pins that resolve with the core pins (pyproject.toml)
  [ -f "$TRAIN_STAMP" ] || TRAIN_OK=0
fi

if [ -f "$DEPS_STAMP" ] && [ -f "$SRC_STAMP" ] && [ "$TRAIN_OK" = 1 ] && [ -x "$VENV/bin/finetune" ]; then
  echo "bootstrap: up to date — $VENV/bin/finetune (dependencies $deps_hash, package $src_hash)"
  exit 0
fi

run() {  # echo, then run unless --dry-run
  echo "  \$ $*"
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}
step_started=0
step() {
  local now; now=$(date +%s)
  if [ "$step_started" != 0 ]; then echo "  ($((now - step_started)) s)"; fi
  step_started=$now
  echo "bootstrap [$1]: $2"
}

copy_sources() {  # the package, out of the plugin folder, so the build writes nothing there
  run rm -rf "$SRC"
  run mkdir -p "$SRC"
  run cp -R "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/LICENSE" "$ROOT/scripts" "$SRC/"
  run rm -rf "$SRC/scripts/llm_finetuning.egg-info"
}

FULL=1
if [ -f "$DEPS_STAMP" ] && [ "$TRAIN_OK" = 1 ] && [ -x "$VENV/bin/finetune" ]; then
  FULL=0
  echo "bootstrap: the plugin's code changed (package $src_hash); reinstalling the package only"
  step 1/2 "copying the package to $SRC"
  copy_sources
  step 2/2 "installing it (dependencies unchanged)"
  run "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$SRC"
else
  echo "bootstrap: installing the plugin's scripts into $VENV (first run, pyproject.toml changed, or --train asked for the [train] extra)"
  step 1/5 "creating the virtual environment with $PYTHON"
  run "$PYTHON" -m venv "$VENV"
  step 2/5 "upgrading pip"
  run "$VENV/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
  step 3/5 "installing $TORCH_PIN first (pinned; the largest download)"
  run "$VENV/bin/pip" install --disable-pip-version-check --progress-bar on "$TORCH_PIN"
  step 4/5 "copying the package to $SRC"
  copy_sources
  step 5/5 "installing the package and its pinned dependencies (trl, transformers, ...${EXTRA:+; the [train] extra: vLLM, DeepSpeed})"
  run "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SRC$EXTRA"
fi
step done "checking the CLI"
run "$VENV/bin/finetune" --version
if [ "$DRY_RUN" = 0 ]; then
  rm -f "$VENV"/.deps-* "$VENV"/.src-*
  if [ "$FULL" = 1 ]; then rm -f "$VENV"/.train-*; fi
  touch "$DEPS_STAMP" "$SRC_STAMP"
  if [ "$TRAIN" = 1 ]; then touch "$TRAIN_STAMP"; fi
  echo "bootstrap: ready — $VENV/bin/finetune"
else
  echo "bootstrap: dry run, nothing changed"
fi
