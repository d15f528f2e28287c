#!/usr/bin/env bash
# Launch GRPO run 'tiny-e2e' — rendered by llm-finetuning 0.1.0; see config/BRIEF.md.
# Target: 8 GPUs: `trl vllm-serve` on 1 GPU(s) as TP 1 × DP 1, training on 7 (server mode: generation and training do not contend for one device).
# !!! UNGATED: RENDERED WITH --no-gate, a preview: these rewards never passed the Phase 1 gate. !!!
# It refuses to start unless a person sets FINETUNE_UNGATED_OVERRIDE=I train on rewards no one read
# First checks this machine with config/env_check.py (what config/target.json says the config needs)
# and refuses to start when anything is missing.
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$RUN_DIR"
# UNGATED preview: no one read these rewards' scores. Only a person's explicit override starts it.
if [ "${FINETUNE_UNGATED_OVERRIDE:-}" != 'I train on rewards no one read' ]; then
  echo "launch: refusing to start: UNGATED preview (rendered with --no-gate; these rewards never passed the" \
    "Phase 1 gate). Pass the gate and re-render, or a person sets FINETUNE_UNGATED_OVERRIDE="'I train on rewards no one read' >&2
  exit 1
fi
# --- the environment env check validated (never whatever `python` / `trl` / `accelerate` PATH finds first)
RENDERED_PYTHON=/work/main/.venv/bin/python  # the interpreter `finetune config render` ran in
PY="${FINETUNE_PYTHON:-$RENDERED_PYTHON}"  # FINETUNE_PYTHON: the python of another ready environment
BIN="$(dirname "$PY")"  # trl and accelerate are run from the same environment as $PY
VLLM_HEALTH_TIMEOUT="${VLLM_HEALTH_TIMEOUT:-600}"  # seconds
VLLM_HEALTH_INTERVAL="${VLLM_HEALTH_INTERVAL:-5}"

# The GPUs this node granted the run: an inherited CUDA_VISIBLE_DEVICES (a scheduler's) or every GPU. The layout
# names GPUs by their place in that list; pick_gpus maps them onto it, so a launch never widens what it was given.
GRANTED_GPUS="${CUDA_VISIBLE_DEVICES-}"
GRANTED_SET="${CUDA_VISIBLE_DEVICES+set}"
pick_gpus() {  # ordinals of the layout → device ids, comma-separated
  local granted=() ids=() i
  if [ -n "$GRANTED_GPUS" ]; then
    IFS=, read -r -a granted <<< "$GRANTED_GPUS"
  fi
  for i in "$@"; do
    if [ -z "$GRANTED_SET" ]; then
      ids+=("$i")
    elif [ "$i" -lt "${#granted[@]}" ]; then
      ids+=("${granted[$i]}")
    else
      echo "launch: the layout needs GPU #$i of this node, but CUDA_VISIBLE_DEVICES grants ${#granted[@]} ($GRANTED_GPUS)" \
        "— fix: grant 8 GPU(s) per node, or re-render for the GPUs granted" >&2
      exit 1
    fi
  done
  (IFS=,; echo "${ids[*]}")
}

refuse_unready() {  # env check printed each missing piece and its install line
  echo "launch: refusing to start: $PY cannot run this config (fix the lines above, or set FINETUNE_PYTHON" \
    "to the python of an environment that can)" >&2
  exit 1
}

wait_for_vllm() {  # URL, server log ("" when it is on another node), server pid ("" when remote)
  local url="$1" log="$2" pid="$3" deadline=$((SECONDS + VLLM_HEALTH_TIMEOUT))
  echo "waiting up to ${VLLM_HEALTH_TIMEOUT}s for trl vllm-serve at $url ${log:+(log: $log)} ..."
  while [ "$SECONDS" -lt "$deadline" ]; do
    # `/health`, as TRL's VLLMClient polls it: `/health/` answers a redirect (307), which counts a dead engine as up
    if curl -sf --max-time 5 "$url/health" >/dev/null 2>&1; then
      echo "trl vllm-serve is healthy"
      return 0
    fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "launch: trl vllm-serve exited before it became healthy; last lines of $log:" >&2
      tail -n 40 "$log" >&2 || true
      exit 1
    fi
    sleep "$VLLM_HEALTH_INTERVAL"
  done
  echo "launch: trl vllm-serve never became healthy at $url within ${VLLM_HEALTH_TIMEOUT}s; not training" \
    "against a dead server" >&2
  if [ -n "$log" ] && [ -f "$log" ]; then
    echo "last lines of $log:" >&2
    tail -n 40 "$log" >&2 || true
  else
    echo "(the server's log is on the generation node: train/vllm-serve.log there)" >&2
  fi
  exit 1
}

STOPPED_FILE="$RUN_DIR/train/STOPPED.json"  # written by train.py's inspection callback when it stops the run
rm -f "$STOPPED_FILE"  # a stop of an earlier launch says nothing about this one
STALLED_FILE="$RUN_DIR/train/STALLED.json"  # written by config/watchdog.py when a moment outlived its budget
rm -f "$STALLED_FILE"

train() {  # run the training command; a run the inspection callback stopped exits 3, whatever it returned
  local rc=0
  "$@" || rc=$?
  if [ -f "$STOPPED_FILE" ]; then
    echo "launch: training was STOPPED by the inspection callback — $STOPPED_FILE:" >&2
    sed -n '1,12p' "$STOPPED_FILE" >&2
    echo "review the step's completions: train/inspections/ (see config/BRIEF.md)" >&2
    exit 3
  fi
  if [ -f "$STALLED_FILE" ]; then
    echo "launch: training STALLED and the watchdog stopped it — $STALLED_FILE:" >&2
    sed -n '1,12p' "$STALLED_FILE" >&2
    echo "the stacks of every thread are in the file it names; a dry run measures each moment:" \
      "config/launch.sh --dry-run (see config/BRIEF.md)" >&2
    exit 4
  fi
  return "$rc"
}

"$PY" config/env_check.py "$RUN_DIR" || refuse_unready

# 8 GPUs on one node: `trl vllm-serve` on granted GPU(s) #0, training on #1,2,3,4,5,6,7 (7 process(es)).
# vLLM layout: TP 1 (vLLM: TP divides the 16 attention heads and divides the 8 KV heads and the MLP's 6144; the smallest such TP) × DP 1.
VLLM_GPUS="$(pick_gpus 0)"
TRAIN_GPUS="$(pick_gpus 1 2 3 4 5 6 7)"
VLLM_LOG="$RUN_DIR/train/vllm-serve.log"
mkdir -p "$RUN_DIR/train"
CUDA_VISIBLE_DEVICES="$VLLM_GPUS" "$BIN/trl" vllm-serve --model Qwen/Qwen3-1.7B \
  --tensor-parallel-size 1 --data-parallel-size 1 \
  --max-model-len 1280 --gpu-memory-utilization 0.9 \
  --host 127.0.0.1 --port 8000 >"$VLLM_LOG" 2>&1 &
VLLM_PID=$!
trap 'kill "$VLLM_PID" 2>/dev/null || true' EXIT
wait_for_vllm "http://127.0.0.1:8000" "$VLLM_LOG" "$VLLM_PID"
CUDA_VISIBLE_DEVICES="$TRAIN_GPUS" train "$BIN/accelerate" launch \
  --config_file config/accelerate.yaml --num_processes 7 \
  config/train.py --vllm-server-host 127.0.0.1 "$@"
