"""Every config/ file a rendered launch.sh or launch.slurm runs or passes exists in the rendered config/.

Running the server-mode launch.sh for real (tests/vllm_cpu/test_server.py) found `accelerate launch
--config_file config/accelerate.yaml` on topologies where no accelerate.yaml was written (one node: 1 GPU
serving + 1 training; 2 nodes x 1 GPU). Checked here over the layouts that render, without vLLM.
"""

from __future__ import annotations

import re

import pytest
from render_fixtures import write_run

LAYOUTS = [(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (2, 2), (8, 2)]  # (GPUs per node, nodes)


@pytest.mark.parametrize("gpus,nodes", LAYOUTS)
def test_launch_files_reference_only_rendered_files(tmp_path, tiny_model_dir, gpus, nodes):
    from finetune.cli import main

    spec = write_run(tmp_path / "run", str(tiny_model_dir),
                     hardware={"profile": "h100-80gb", "gpus": gpus, "nodes": nodes})
    if main(["config", "render", str(spec), "--no-gate"]) != 0:
        pytest.skip(f"{gpus} GPU(s) x {nodes} node(s) is refused for the tiny model (layouts: another test)")
    config = tmp_path / "run" / "config"
    rendered = {p.name for p in config.iterdir()}
    for launcher in ("launch.sh", "launch.slurm"):
        if not (config / launcher).exists():
            continue
        text = "\n".join(ln for ln in (config / launcher).read_text().splitlines() if not ln.lstrip().startswith("#"))
        named = set(re.findall(r"config/([\w.]+)", text)) - {"launch.slurm"}  # the sbatch hint names itself
        assert named and named <= rendered, (launcher, sorted(named - rendered))
