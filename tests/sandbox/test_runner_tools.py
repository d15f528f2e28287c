"""The code-running tool API (`from rewards_sandbox import run_python`): a user's env.py imports it, `rewards
render` copies the runner beside rewards_env.py (bound by the gate like every rewards_*.py), the rendered
environment runs the model's snippets in the sandbox, and every failure — the snippet's, an attack's, the
sandbox's own — comes back as the tool's result text; a host that cannot isolate code stops the run at its
first environment in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from finetune.sandbox import runner_source
from finetune.sandbox.runner import detect_isolation, run_python, tool_pool

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-interpreter"
HOST = detect_isolation()
can_isolate = HOST.at_least("namespaces")  # the tool sandbox's default minimum
simulate_weak_host = pytest.mark.skipif(
    os.geteuid() != 0 or not can_isolate or not shutil.which("setpriv"),
    reason="simulating a host without CAP_SYS_ADMIN needs root with every capability and setpriv")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The code-interpreter example rendered into a fresh run directory."""
    from finetune.cli import main

    run = tmp_path_factory.mktemp("code-interpreter")
    for name in ("env.py", "spec.yaml", "data.jsonl"):
        shutil.copy(EXAMPLE / name, run / name)
    assert main(["rewards", "render", str(run / "spec.yaml")]) == 0
    return run


@pytest.fixture(scope="module")
def rewards(run_dir):
    from finetune.inspect.rewardmod import load_rewards

    return load_rewards(run_dir).module


def test_render_copies_the_sandbox_beside_every_environment(run_dir):
    from finetune.hashing import bound_hashes
    from finetune.rewards.render import render_sources
    from finetune.spec import EnvironmentSpec, load_spec

    assert (run_dir / "rewards_sandbox.py").read_text() == runner_source()  # verbatim: standalone, stdlib only
    assert (run_dir / "rewards_env.py").read_text() == (EXAMPLE / "env.py").read_text()
    spec = load_spec(run_dir / "spec.yaml")
    assert "rewards_sandbox.py" in bound_hashes(run_dir, [r.model_dump() for r in spec.rewards])  # the gate binds it
    # an environment that runs no code still runs in the sandbox (agent-written code), but starts no tool pool
    calculator = EnvironmentSpec.model_validate({"file": "env.py", "class": "Calculator"})
    tool_env = EXAMPLE.parent / "tool-environment" / "spec.yaml"
    files = render_sources(spec.rewards, source_path=tool_env, tool_env=calculator)
    assert "rewards_env.py" in files and files["rewards_sandbox.py"] == runner_source()
    assert "_tool_sandbox_ready" not in files["rewards.py"] and "_tool_sandbox_ready" in \
        (run_dir / "rewards.py").read_text()


@pytest.mark.skipif(not can_isolate, reason=f"host grants '{HOST.level}' isolation, below the tool default")
def test_the_rendered_environment_runs_snippets_in_the_sandbox(rewards, run_dir):
    env = rewards.environment_factory()
    env.reset(prompt=[{"role": "user", "content": "What is 17 * 23 + 5?"}], answer="396")
    python = rewards.environment_tools(env)["python"]
    assert python(code="print(17 * 23 + 5)") == "396\n"  # exactly what the program printed
    assert rewards._environment_score(env) == 1.0
    # attacks come back to the model as a contained error, and change nothing outside
    victim = Path.home() / ".sbx-tool-secret"
    victim.write_text("hf_secret_value")
    victim.chmod(0o600)
    try:
        for code in (f"print(open({str(victim)!r}).read())", f"open({str(run_dir / 'rewards_env.py')!r}, 'w')",
                     "open('/etc/hostname', 'a').write('x')", "import os\nprint(os.environ['HF_TOKEN'])"):
            result = python(code=code)
            assert result.endswith("[exit status 1]") and "Error" in result, result
            assert "hf_secret_value" not in result
    finally:
        victim.unlink()
    assert (run_dir / "rewards_env.py").read_text() == (EXAMPLE / "env.py").read_text()
    assert python(code="while True:\n    pass").endswith("[timed out after 5 s]")
    assert rewards._environment_score(env) == 1.0  # the failed calls did not change the solved episode


def test_a_tool_failure_is_the_tool_result_never_an_exception():
    assert run_python(123) == "[error: code and stdin must be strings]"  # the model wrote a number
    text = run_python("import sys\nprint('partial')\nsys.exit(3)")
    if can_isolate:
        assert text == "partial\n[exit status 3]"
    else:  # the tool default refuses weaker isolation: one line, as the tool's result
        assert text.startswith("[sandbox unavailable: ") and "\n" not in text


@pytest.mark.skipif(not can_isolate, reason=f"host grants '{HOST.level}' isolation, below the tool default")
def test_tool_pool_settings_are_chosen_once():
    pool = tool_pool()
    assert tool_pool() is pool and pool.isolation_level == "namespaces"
    with pytest.raises(ValueError, match="already runs with"):
        tool_pool(memory_mb=64)


WEAK_HOST_SCRIPT = """
import json, sys
from finetune.inspect.rewardmod import load_rewards
from finetune.sandbox.runner import run_python
line = run_python("print(1)")
try:
    load_rewards(sys.argv[1]).module.environment_factory()
except SystemExit as exc:
    print(json.dumps({"tool": line, "factory": str(exc)}))
"""


@simulate_weak_host
def test_a_host_that_cannot_isolate_is_one_line(run_dir):
    """docker's default (no CAP_SYS_ADMIN), simulated by dropping it from the bounding set: the tool answers
    one line, and the rendered factory refuses to build the environment (train.py then stops at start)."""
    out = subprocess.run(["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c", WEAK_HOST_SCRIPT,
                          str(run_dir)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for line in got.values():
        assert "\n" not in line and "'unprivileged', below the required 'namespaces'" in line, line
    assert got["tool"].startswith("[sandbox unavailable: ")
    assert got["factory"].startswith("refusing to run the environment CodeInterpreter: ")



@pytest.mark.skipif(not can_isolate, reason=f"host grants '{HOST.level}' isolation, below the tool default")
def test_every_copy_of_the_runner_shares_one_tool_pool():
    """Each run directory's rewards.py loads its own rewards_sandbox (again for every command that loads the
    run): all of them use the one tool pool, never one more pool per load (a process may open 16)."""
    import importlib.util

    from finetune.sandbox import runner

    copies = []
    for name in ("_tool_copy_a", "_tool_copy_b"):
        spec = importlib.util.spec_from_file_location(name, runner.__file__)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # as rewards.py registers its helpers (dataclasses look the module up)
        spec.loader.exec_module(module)
        copies.append(module)
        del sys.modules[name]  # as the next load of the run directory drops it
    assert [c.run_python("print(sum(range(10)))") for c in copies] == ["45\n", "45\n"]
    assert runner.run_python("print('same')") == "same\n"
    assert copies[0]._TOOL_STATE is copies[1]._TOOL_STATE is runner._TOOL_STATE
    assert copies[0].tool_pool() is runner.tool_pool()
