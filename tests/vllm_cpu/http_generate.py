"""Generation over HTTP from a running `trl vllm-serve`, through TRL's own client (VLLMClient.generate):
what a server-mode trainer does each step, minus the NCCL weight sync. Prints one JSON line.

    python http_generate.py HOST PORT OUT.json
"""

from __future__ import annotations

import json
import sys


def main(host: str, port: int, out: str) -> None:
    from trl.generation.vllm_client import VLLMClient

    client = VLLMClient(base_url=f"http://{host}:{port}", connection_timeout=60)
    result = client.generate(prompts=[[3, 20, 30, 40, 50]], n=4, max_tokens=8, temperature=1.0, logprobs=0)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({k: result[k] for k in ("completion_ids", "logprobs") if k in result}, fh)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
