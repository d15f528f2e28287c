"""ExecJob: a snippet run as a program in the sandbox returns what it printed — exactly what the interpreter
prints outside it for an ordinary snippet — and a hostile snippet (writes outside its scratch dir, reads a
secret from the environment or a file under $HOME, opens a socket, forks without end, loops, floods its
output) is contained: nothing leaks, nothing outside changes, the pool keeps serving."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from finetune.sandbox.runner import ExecJob, SandboxPool, detect_isolation

TIMEOUT_S = 1.5
HOST = detect_isolation()
needs_namespaces = pytest.mark.skipif(not HOST.at_least("namespaces"), reason=f"host grants '{HOST.level}' "
                                      "isolation: without mount / network namespaces the host's files and "
                                      "network are shared")
needs_uid = pytest.mark.skipif(not HOST.at_least("unprivileged"), reason="a snippet running as the trusted uid "
                               "can read what that uid can")


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2, timeout_s=TIMEOUT_S, memory_mb=256, min_isolation="process",
                     max_output_bytes=4096) as p:
        yield p


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def contained(pool: SandboxPool, code: str, stdin: str = ""):
    """Run a hostile snippet; the pool must answer within the timeout (plus teardown) and keep serving."""
    started = time.monotonic()
    execution = pool.execute(ExecJob(code, stdin))
    assert time.monotonic() - started < TIMEOUT_S + 3.0, execution
    assert execution.status != "error", execution  # the sandbox itself never fails on a hostile program
    assert pool.execute(ExecJob("print(6 * 7)")).stdout == "42\n", "pool stopped serving"
    return execution


# Ordinary snippets as a code-interpreter tool gets them, with the stdin they read.
ORDINARY = [
    ("print(sum(range(101)))", ""),
    ("import math\nprint(math.factorial(20))\nprint(f'{math.pi:.5f}')", ""),
    ("x = [i * i for i in range(5)]\nprint(x, len(x), sep='\\n')", ""),
    ("import sys\nsys.stdout.write('no newline')", ""),
    ("print('ünïcödé ✓ 数学')\nprint()\nprint('\\tindented  ')", ""),
    ("pass", ""),
    ("n = int(input())\nprint(sum(int(input()) for _ in range(n)))", "3\n4\n5\n6\n"),
    ("import sys\ndata = sys.stdin.read().split()\nprint(max(map(int, data)))", "3 9 -2\n"),
    ("import json\nprint(json.dumps({'b': [1, 2.5, None], 'a': 'x'}, sort_keys=True))", ""),
    ("from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))", ""),
]


@pytest.mark.parametrize("code, stdin", ORDINARY, ids=range(len(ORDINARY)))
def test_ordinary_snippets_print_what_the_interpreter_prints(pool, code, stdin):
    reference = subprocess.run([sys.executable, "-I", "-c", code], input=stdin, capture_output=True, text=True,
                               timeout=60, env={"PYTHONIOENCODING": "utf-8", "LANG": "C.UTF-8"})
    execution = pool.execute(ExecJob(code, stdin))
    assert (execution.status, execution.exit_code) == ("ok", 0), execution
    assert execution.stdout == reference.stdout
    assert execution.as_text() == reference.stdout  # a clean run is returned to the model verbatim
    assert not (execution.stdout_truncated or execution.stderr_truncated or execution.timed_out)


def test_an_exception_returns_its_traceback_and_exit_status(pool):
    execution = pool.execute(ExecJob("print('before')\nprint(1 / 0)"))
    assert execution.status == "failed" and execution.exit_code == 1
    assert execution.stdout == "before\n"
    assert execution.detail == "ZeroDivisionError: division by zero"
    assert 'File "<snippet>", line 2' in execution.stderr
    assert "runner" not in execution.stderr and "rewards_sandbox" not in execution.stderr  # no harness frame
    text = execution.as_text()
    assert text.startswith("before\n[stderr]\nTraceback") and text.endswith("[exit status 1]")


def test_a_batch_runs_in_parallel_in_order(pool):
    jobs = [ExecJob(f"import time\ntime.sleep(0.3)\nprint({i})") for i in range(4)]
    started = time.monotonic()
    executions = pool.execute_batch(jobs)
    assert [e.stdout for e in executions] == [f"{i}\n" for i in range(4)]
    assert time.monotonic() - started < 4 * 0.3 + 1.0


@needs_namespaces
def test_writes_land_only_in_the_scratch_dir(pool, tmp_path):
    tmp_path.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    tag = secrets.token_hex(4)
    outside = [str(victim), str(Path.cwd() / f"sbx-{tag}"), str(Path.home() / f"sbx-{tag}"), "/etc/passwd",
               f"/usr/sbx-{tag}", f"/sbx-{tag}"]
    scratch = [f"/tmp/sbx-{tag}", f"/var/tmp/sbx-{tag}"]  # the sandbox's own tmpfs, gone with it
    code = src(f"""
        import os
        with open("scratch.txt", "w") as fh:
            fh.write("kept")
        print(open("scratch.txt").read(), os.getcwd())
        for path in {outside + scratch!r}:
            try:
                with open(path, "a") as fh:
                    fh.write("pwned")
                print("WROTE", path)
            except OSError as exc:
                print("refused", type(exc).__name__)
    """)
    execution = contained(pool, code)
    assert execution.status == "ok" and execution.stdout.startswith("kept ")
    assert [line.split()[1] for line in execution.stdout.splitlines() if line.startswith("WROTE")] == scratch
    assert victim.read_text() == "original" and "pwned" not in Path("/etc/passwd").read_text()
    assert not [p for p in outside[1:3] + outside[4:] + scratch if os.path.exists(p)]
    # the scratch dir is per execution: the next one does not see the file
    assert pool.execute(ExecJob("import os\nprint(os.listdir('.'))")).stdout == "[]\n"


@needs_uid
def test_a_secret_in_the_environment_does_not_leak(pool, monkeypatch):
    secret = "sk-test-" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("HF_TOKEN", secret)
    code = src("""
        import os
        print(os.environ.get("OPENAI_API_KEY"), os.environ.get("HF_TOKEN"))
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    print(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
                except OSError:
                    pass
        print(sorted(os.environ))
    """)
    execution = contained(pool, code)
    assert secret not in execution.stdout + execution.stderr
    assert execution.stdout.startswith("None None\n")


@needs_uid
def test_a_file_under_home_stays_unread(pool):
    secret = "hf_" + secrets.token_hex(12)
    path = Path.home() / f".sbx-token-{secrets.token_hex(4)}"
    path.write_text(secret)
    path.chmod(0o600)
    try:
        code = src(f"""
            import os, glob
            for p in [{str(path)!r}, *glob.glob(os.path.expanduser("~") + "/.*"), *glob.glob("/root/.*")]:
                try:
                    print(open(p).read())
                except OSError as exc:
                    print(type(exc).__name__)
        """)
        execution = contained(pool, code)
        assert secret not in execution.stdout + execution.stderr
    finally:
        path.unlink()


@needs_namespaces
def test_no_network(pool):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.3)
    port = listener.getsockname()[1]
    code = src(f"""
        import socket
        for host, port in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("pypi.org", 443)):
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                print("CONNECTED", host)
            except OSError as exc:
                print("refused", type(exc).__name__)
    """)
    execution = contained(pool, code)
    assert "CONNECTED" not in execution.stdout and execution.stdout.count("refused") == 3
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


def test_a_fork_bomb_times_out_and_leaves_nothing(pool):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    execution = contained(pool, code)
    assert execution.status == "timeout" and execution.timed_out
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes


def test_an_infinite_loop_times_out(pool):
    execution = contained(pool, "print('started', flush=True)\nwhile True:\n    pass\n")
    assert execution.status == "timeout" and execution.timed_out and execution.exit_code is None
    assert execution.stdout == "started\n"  # what it printed before the limit comes back
    assert execution.wall_s < TIMEOUT_S + 1.0
    assert execution.as_text() == f"started\n[timed out after {TIMEOUT_S:g} s]"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_huge_output_is_cut_at_the_cap_and_marked(pool, stream):
    execution = contained(pool, f"import sys\nwhile True:\n    sys.{stream}.write('é' * 1000)\n")
    assert execution.status == "output_limit" and execution.wall_s < TIMEOUT_S
    text = execution.stdout if stream == "stdout" else execution.stderr
    assert set(text) == {"é"} and len(text.encode()) <= 4096  # cut at a character boundary
    assert execution.stdout_truncated == (stream == "stdout")
    assert execution.stderr_truncated == (stream == "stderr")
    assert "truncated" in execution.as_text() or "last part" in execution.as_text()


def test_a_per_job_cap_and_timeout(pool):
    execution = pool.execute(ExecJob("print('x' * 100)", max_output_bytes=10))
    assert execution.stdout == "x" * 10 and execution.stdout_truncated
    execution = pool.execute(ExecJob("import time\ntime.sleep(2)\nprint(1)", timeout_s=0.3))
    assert execution.status == "timeout" and execution.wall_s < 1.5
