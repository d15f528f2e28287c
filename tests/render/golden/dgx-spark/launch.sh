#!/usr/bin/env bash
# Launch GRPO run 'tiny-e2e' — rendered by llm-finetuning 0.1.0; see config/BRIEF.md.
# Target: one GPU: vLLM colocated with training (the seed's single-GPU default).
# !!! RENDERED WITH --no-gate (TESTS ONLY): these rewards never passed the Phase 1 gate. !!!
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$RUN_DIR"

# One GPU: vLLM runs colocated inside the training process (vllm_mode: colocate).
exec python config/train.py "$@"
