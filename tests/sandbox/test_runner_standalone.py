"""The runner is rendered beside rewards.py as rewards_sandbox.py and must work there alone: stdlib
only, no import of this plugin, in a fresh isolated interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

from finetune.sandbox import RENDERED_NAME, runner_source


def test_runner_imports_only_the_standard_library():
    tree = ast.parse(runner_source())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_rendered_copy_runs_a_batch_without_the_plugin(tmp_path):
    (tmp_path / RENDERED_NAME).write_text(runner_source())
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import rewards_sandbox as sb
        assert "finetune" not in sys.modules
        with sb.SandboxPool(workers=2, timeout_s=2, min_isolation="process") as pool:
            results = pool.run_batch([
                sb.StdioJob("print(int(input()) * 2)", [sb.StdioTest("21", "42")]),
                sb.CallJob("def f(x):\\n    return x + 1\\n", "f", [sb.CallTest([1], 2)]),
                sb.AssertJob("def f(x):\\n    return x + 1\\n", ["assert f(1) == 2"]),
                sb.AssertJob("def f(x):\\n    return x\\n", ["assert f(1) == 2"]),
            ])
        print([r.passed for r in results], "finetune" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-I", "-c", script, str(tmp_path)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True, True, True, False] False"


def test_two_copies_of_the_runner_never_hand_out_the_same_pool_slot():
    """The runner is imported as finetune.sandbox.runner and, rendered, as rewards_sandbox (possibly
    re-imported fresh by the inspector): every copy in a process must share one slot registry, or two
    live pools could run candidates under the same uid."""
    import importlib.util
    import sys

    from finetune.sandbox import runner

    copies = []
    for name in ("_copy_a_rewards_sandbox", "_copy_b_rewards_sandbox"):
        spec = importlib.util.spec_from_file_location(name, runner.__file__)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        copies.append(module)
    claimed = []
    try:
        claimed = [runner._claim_pool_index(), copies[0]._claim_pool_index(), copies[1]._claim_pool_index()]
        assert len(set(claimed)) == 3
        assert len({runner._uid_block(i) for i in claimed}) == 3
    finally:
        with runner._pool_indices_lock:
            runner._pool_indices.difference_update(claimed)
        for name in ("_copy_a_rewards_sandbox", "_copy_b_rewards_sandbox"):
            sys.modules.pop(name, None)
