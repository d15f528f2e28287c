#!/usr/bin/env bash
# Launch GRPO run 'tiny-e2e' — rendered by llm-finetuning 0.1.0; see config/BRIEF.md.
# Target: 8 GPUs: `trl vllm-serve` on 1, training on 7 (server mode: generation and training do not contend for one device).
# !!! RENDERED WITH --no-gate (TESTS ONLY): these rewards never passed the Phase 1 gate. !!!
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$RUN_DIR"

# 8 GPUs on one node: `trl vllm-serve` on GPU(s) 0, training on the other 7.
VLLM_LOG="$RUN_DIR/train/vllm-serve.log"
mkdir -p "$RUN_DIR/train"
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-1.7B \
  --tensor-parallel-size 1 --data-parallel-size 1 \
  --max-model-len 1280 --gpu-memory-utilization 0.9 \
  --host 127.0.0.1 --port 8000 >"$VLLM_LOG" 2>&1 &
VLLM_PID=$!
trap 'kill "$VLLM_PID" 2>/dev/null || true' EXIT
echo "waiting for trl vllm-serve (log: $VLLM_LOG) ..."
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:8000/health/" >/dev/null && break
  kill -0 "$VLLM_PID" 2>/dev/null || { echo "trl vllm-serve exited; see $VLLM_LOG" >&2; exit 1; }
  sleep 5
done
CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch \
  --config_file config/accelerate.yaml --num_processes 7 \
  config/train.py --vllm-server-host 127.0.0.1 "$@"
