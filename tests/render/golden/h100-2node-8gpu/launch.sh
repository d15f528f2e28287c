#!/usr/bin/env bash
# Launch GRPO run 'tiny-e2e' — rendered by llm-finetuning 0.1.0; see config/BRIEF.md.
# Target: 2 nodes × 8 GPUs: node 0 serves generation (`trl vllm-serve`, tensor parallel 8), node 1 trains (8 processes).
# !!! RENDERED WITH --no-gate (TESTS ONLY): these rewards never passed the Phase 1 gate. !!!
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$RUN_DIR"

# 2 nodes × 8 GPUs. Run this script on EVERY node with:
#   NODE_RANK   0 on the generation node, 1..1 on the training nodes
#   VLLM_HOST   address of node 0 (the `trl vllm-serve` node), reachable from the training nodes
#   MAIN_HOST   address of node 1 (the first training node: accelerate's main process)
#   MAIN_PORT   a free port on node 1 (default 29500)
: "${NODE_RANK:?set NODE_RANK}" "${VLLM_HOST:?set VLLM_HOST}" "${MAIN_HOST:?set MAIN_HOST}"
MAIN_PORT="${MAIN_PORT:-29500}"
if [ "$NODE_RANK" -eq 0 ]; then
  # generation node: `trl vllm-serve`, tensor parallel over 8 GPU(s)
  CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 exec trl vllm-serve --model Qwen/Qwen3-1.7B \
    --tensor-parallel-size 8 --data-parallel-size 1 \
    --max-model-len 1280 --gpu-memory-utilization 0.9 \
    --host 0.0.0.0 --port 8000
fi
echo "waiting for trl vllm-serve on $VLLM_HOST:8000 ..."
for _ in $(seq 1 120); do
  curl -sf "http://$VLLM_HOST:8000/health/" >/dev/null && break
  sleep 5
done
# training nodes 1..1: 8 processes each, 8 in all
exec accelerate launch --config_file config/accelerate.yaml \
  --num_machines 1 --num_processes 8 \
  --machine_rank "$((NODE_RANK - 1))" --main_process_ip "$MAIN_HOST" --main_process_port "$MAIN_PORT" \
  config/train.py --vllm-server-host "$VLLM_HOST" "$@"
