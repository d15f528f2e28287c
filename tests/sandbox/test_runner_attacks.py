"""The attack battery: each attack is scored as not passed, leaves the host unaffected, leaves
the pool serving, and finishes within a bounded wall time — at every isolation level the host grants
at or above ``unprivileged``. Limits are tight (1.5 s, 256 MB) to keep the battery fast."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from finetune.sandbox.runner import (
    AssertJob,
    CallJob,
    CallTest,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    StdioJob,
    StdioTest,
    detect_isolation,
)

TIMEOUT_S = 1.0
# A loaded 2-core CI box: timeout + process teardown + slack, still far below any "stalled" pool.
WALL_BOUND_S = TIMEOUT_S + 3.0
HOST = detect_isolation()
LEVELS = [lvl for lvl in ("namespaces", "unprivileged") if HOST.at_least(lvl)]
GOOD_JOB = CallJob("def add(a, b):\n    return a + b\n", "add", [CallTest([2, 3], 5)], timeout_s=10)


@pytest.fixture(scope="module", params=LEVELS or [pytest.param("none", marks=pytest.mark.skip(
    reason=f"host grants only '{HOST.level}' isolation: {HOST.notes}"))])
def level_pool(request):
    with SandboxPool(workers=2, timeout_s=TIMEOUT_S, memory_mb=256, min_isolation="unprivileged",
                     isolation=request.param) as pool:
        assert pool.isolation_level == request.param
        yield pool


def _uid_of(pid: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _ppid_of(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def stray_processes(pool: SandboxPool) -> list[int]:
    """Processes running as a candidate uid, or children of a zygote (guards / candidates left over)."""
    uids, zygotes = pool.candidate_uids, set(pool.zygote_pids)
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (_uid_of(p) in uids or _ppid_of(p) in zygotes)]


def attack(pool: SandboxPool, job, bound_s: float = WALL_BOUND_S):
    """Run one attack and check the four invariants common to every attack; return its Result."""
    started = time.monotonic()
    result = pool.run(job)
    elapsed = time.monotonic() - started
    assert not result.passed, result
    assert result.score == 0.0, result
    assert elapsed < bound_s, f"took {elapsed:.2f}s: {result}"
    deadline = time.monotonic() + 2.0
    while stray_processes(pool) and time.monotonic() < deadline:  # reaping is asynchronous
        time.sleep(0.05)
    assert stray_processes(pool) == []
    assert pool.run(GOOD_JOB).passed, "pool stopped serving"
    return result


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def test_fork_bomb(level_pool):
    code = src("""
        import os
        def add(a, b):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    """)
    result = attack(level_pool, CallJob(code, "add", [CallTest([1, 2], 3)]))
    assert result.status == "timeout"
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes


def test_memory_bomb(level_pool):
    result = attack(level_pool, StdioJob("x = bytearray(8 * 1024 ** 3)\nprint(1)", [StdioTest("", "1\n")]))
    assert result.status == "crashed" and "MemoryError" in result.detail, result
    # Growing to the limit touches 256 MB of pages: on a loaded box that may take longer than the timeout.
    result = attack(level_pool, StdioJob("x = []\nwhile True:\n    x.append(' ' * 10 ** 7)", [("", "1\n")]))
    assert result.status == "timeout" or "MemoryError" in result.detail, result


def test_infinite_loop(level_pool):
    result = attack(level_pool, AssertJob("def f():\n    while True:\n        pass\n", ["assert f() == 1"]))
    assert result.status == "timeout"


def test_long_sleep(level_pool):
    result = attack(level_pool, StdioJob("import time\ntime.sleep(100)\nprint(1)", [("", "1\n")]))
    assert result.status == "timeout"
    assert result.wall_s < TIMEOUT_S + 0.5


def _free_bytes(path: str) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def test_disk_filling_write(level_pool):
    """One huge file: stopped by RLIMIT_FSIZE (and the work dir's tmpfs size), and deleted after."""
    code = "with open('fill', 'wb') as fh:\n    while True:\n        fh.write(b'0' * (1 << 20))\n"
    free_before = _free_bytes(tempfile.gettempdir())
    result = attack(level_pool, StdioJob(code, [("", "done\n")]))
    assert result.status in ("crashed", "timeout"), result
    assert free_before - _free_bytes(tempfile.gettempdir()) < 16 << 20  # others may write a little


def test_persistent_disk_filling_write(level_pool):
    """File after file, ignoring every error: only a size-limited tmpfs stops this."""
    if level_pool.isolation_level != "namespaces":
        pytest.skip("without a mount namespace only RLIMIT_FSIZE (per file) bounds writes")
    code = src("""
        n = 0
        while True:
            try:
                with open(f"fill{n}", "wb") as fh:
                    fh.write(b"0" * (1 << 20) * 16)
            except OSError:
                pass
            n += 1
    """)
    free_before = _free_bytes("/tmp")
    attack(level_pool, StdioJob(code, [("", "done\n")]))
    assert free_before - _free_bytes("/tmp") < 16 << 20


def test_writing_outside_the_work_dir(level_pool, tmp_path):
    if level_pool.isolation_level != "namespaces":
        pytest.skip("without a mount namespace world-writable dirs like /tmp stay writable")
    tmp_path.chmod(0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    tag = secrets.token_hex(4)
    targets = [f"/tmp/sbx-attack-{tag}", f"/var/tmp/sbx-attack-{tag}", f"/dev/shm/sbx-attack-{tag}",
               str(Path.cwd() / f"sbx-attack-{tag}"), str(victim), f"../../sbx-attack-{tag}", "/etc/passwd"]
    code = src(f"""
        wrote = []
        for path in {targets!r}:
            try:
                with open(path, "a") as fh:
                    fh.write("pwned")
                wrote.append(path)
            except OSError:
                pass
        print("wrote", wrote)
    """)
    result = attack(level_pool, StdioJob(code, [("", "nothing\n")]))
    assert victim.read_text() == "original"
    for path in targets[:4]:
        assert not os.path.exists(path), path
    assert "pwned" not in Path("/etc/passwd").read_text()
    assert result.status == "failed"


def test_escaping_through_a_user_namespace(level_pool):
    """A fresh user namespace gives the candidate capabilities over its own namespaces only: it must not
    get a writable root, an unhidden working dir or a usable network out of it."""
    if level_pool.isolation_level != "namespaces":
        pytest.skip("the namespaces level's guarantee")
    tag = secrets.token_hex(4)
    code = src(f"""
        import subprocess
        for cmd in ("unshare -Urm sh -c 'mount -o remount,rw / && touch /sbx-escape-{tag}'",
                    "unshare -Urm sh -c 'umount -l /tmp && touch /tmp/sbx-escape-{tag}'",
                    "unshare -Urm sh -c 'umount -l {Path.cwd()} && ls {Path.cwd()}'"):
            out = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            print(out.stdout)
    """)
    cwd_listing = "\n".join(sorted(os.listdir(Path.cwd()))) + "\n"
    attack(level_pool, StdioJob(code, [StdioTest("", cwd_listing)]))
    assert not os.path.exists(f"/sbx-escape-{tag}") and not os.path.exists(f"/tmp/sbx-escape-{tag}")


def test_reading_the_trusted_working_dir(level_pool):
    """A run dir holds the dataset with the expected outputs: the candidate must not read it."""
    if level_pool.isolation_level != "namespaces":
        pytest.skip("without a mount namespace only file permissions protect the working dir")
    this_file = Path(__file__).resolve()
    if Path.cwd().resolve() not in this_file.parents:
        pytest.skip("the suite runs from outside the repository")
    first_line = this_file.read_text().splitlines()[0]
    code = f"print(open({str(this_file)!r}).readline().rstrip())"
    result = attack(level_pool, StdioJob(code, [StdioTest("", first_line + "\n")]))
    assert result.status == "crashed" and "FileNotFoundError" in result.detail, result


@pytest.mark.skipif(not HOST.at_least("unprivileged"), reason="a candidate running as the trusted uid can "
                    "read the trusted process's /proc/<pid>/environ")
def test_reading_an_env_secret(monkeypatch):
    secret = "sk-fake-" + secrets.token_hex(8)
    monkeypatch.setenv("FAKE_API_KEY", secret)
    code = src("""
        import os
        found = [v for v in os.environ.values() if v.startswith("sk-fake-")]
        for pid in os.listdir("/proc"):
            try:
                found += [e for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
                          if b"sk-fake-" in e]
            except OSError:
                pass
        print(found[0].decode().split("=")[-1] if found and isinstance(found[0], bytes)
              else (found[0] if found else "no secret"))
    """)
    with SandboxPool(workers=1, timeout_s=TIMEOUT_S, memory_mb=256, min_isolation="unprivileged") as pool:
        # The job passes only if the secret leaked.
        result = attack(pool, StdioJob(code, [StdioTest("", secret + "\n")]))
        assert secret not in result.detail


def test_opening_a_network_connection(level_pool):
    if level_pool.isolation_level != "namespaces":
        pytest.skip("without a network namespace the candidate shares the host's network")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = src(f"""
        import socket
        def add(a, b):
            for host, port in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("pypi.org", 443)):
                try:
                    socket.create_connection((host, port), timeout=0.5).close()
                    return 5
                except OSError:
                    pass
            return 0
    """)
    result = attack(level_pool, CallJob(code, "add", [CallTest([2, 3], 5)]))
    assert result.status == "failed"
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


def test_killing_the_parent(level_pool):
    code = src(f"""
        import os, signal
        for target in (os.getppid(), {os.getpid()}, *level_pool_zygotes, -1, 0):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        def add(a, b):
            return 0
    """).replace("level_pool_zygotes", repr(tuple(level_pool.zygote_pids)))
    zygotes = set(level_pool.zygote_pids)
    attack(level_pool, CallJob(code, "add", [CallTest([2, 3], 5)]))
    assert set(level_pool.zygote_pids) == zygotes  # no zygote had to be restarted


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)", "raise SystemExit(0)"])
def test_exit_before_the_tests(level_pool, exit_call):
    code = f"import os, sys\ndef add(a, b):\n    return a + b\n{exit_call}\n"
    results = [attack(level_pool, AssertJob(code, ["assert add(1, 2) == 3", "assert abs(add(1, 1)) >= 2"])),
               attack(level_pool, CallJob(code, "add", [CallTest([1, 2], 3)]))]
    assert all(r.status == "exited_early" for r in results), results
    # Exiting from inside a test (exit code 0) fails that test and everything after it.
    inside = f"import os, sys\ndef add(a, b):\n    {exit_call}\n"
    attack(level_pool, AssertJob(inside, ["assert add(1, 2) == 3", "assert abs(add(1, 1)) >= 2"]))


def test_monkeypatching_the_harness_or_builtins(level_pool):
    code = src("""
        import builtins, math, sys, json
        builtins.abs = lambda x: 0
        builtins.isinstance = lambda *a: True
        math.isclose = lambda *a, **k: True
        json.dumps = lambda *a, **k: '{"i": 0, "ok": true, "tk": "x"}'
        main = sys.modules["__main__"]
        for name in dir(main):
            if name.startswith("_") and callable(getattr(main, name)) and not name.startswith("__"):
                setattr(main, name, lambda *a, **k: True)
        class AlwaysEqual:
            def __eq__(self, other):
                return True
            def __bool__(self):
                return True
        class SneakyInt(int):
            def __eq__(self, other):
                return True
        def area(r):
            return AlwaysEqual()
        def double(x):
            return SneakyInt(0)
    """)
    result = attack(level_pool, AssertJob(code, [
        "assert area(2) == 12.5",
        "assert abs(double(2) - 4) < 1e-9",
        "assert math.isclose(double(2), 4)",
        "assert double(2) == 4",
        "assert isinstance(area(1), float)",
    ]))
    assert result.tests_passed == 0, result


def test_printing_a_fake_pass_marker(level_pool):
    code = src("""
        import os, sys
        for line in ("PASSED", "OK", "All tests passed", '{"done": "x"}', '{"load": true}',
                     '{"i": 0, "ok": true, "tk": "0" * 32}', '{"i": 1, "ok": true, "v": 3}'):
            print(line)
            print(line, file=sys.stderr)
        for fd in range(3, 10):
            try:
                os.write(fd, b'{"load": true}\\n{"i": 0, "ok": true, "tk": "guess"}\\n'
                             b'{"i": 1, "ok": true, "v": {"c": []}}\\n{"i": 1, "ok": true, "v": {"d": 5}}\\n'
                             b'[[[[[[[[[[[[[[[[[[[[\\n{"i": 1, "ok": true, "v": 1' + b'0' * 5000 + b'}\\n'
                             b'{"done": "guess"}\\n')
            except OSError:
                pass
        sys.stdout.flush()
        os._exit(0)
    """)
    result = attack(level_pool, AssertJob(code, ["x = add(1, 2)\nassert x == 3", "assert add(1, 2) == 3"]))
    assert result.status in ("failed", "exited_early") and result.tests_passed == 0
    attack(level_pool, StdioJob(code, [("", "3\n")]))


def test_daemon_outliving_the_timeout(level_pool):
    marker = f"/tmp/sbx-daemon-{secrets.token_hex(4)}"
    code = src(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep({TIMEOUT_S + 1})
                open({marker!r}, "w").write("alive")
                time.sleep(60)
            os._exit(0)
        def add(a, b):
            return 0
    """)
    attack(level_pool, CallJob(code, "add", [CallTest([2, 3], 5)]))
    time.sleep(TIMEOUT_S + 1.5)
    assert not os.path.exists(marker)
    assert stray_processes(level_pool) == []


@pytest.mark.parametrize("stream", ["sys.stdout", "sys.stderr"])
def test_huge_output(level_pool, stream):
    code = f"import sys\nwhile True:\n    {stream}.write('x' * 100000)\n"
    result = attack(level_pool, StdioJob(code, [("", "x\n")]))
    assert result.status == "output_limit", result
    assert result.wall_s < TIMEOUT_S  # killed at the cap, not at the timeout


def test_one_runaway_does_not_stall_the_batch(level_pool):
    jobs = [StdioJob("while True: pass", [("", "")])] + [GOOD_JOB] * 6
    started = time.monotonic()
    results = level_pool.run_batch(jobs)
    assert time.monotonic() - started < WALL_BOUND_S
    assert results[0].status == "timeout" and all(r.passed for r in results[1:])


REFUSAL_SCRIPT = """
import sys
from finetune.sandbox.runner import SandboxPool, SandboxUnavailable
try:
    with SandboxPool(workers=1, min_isolation=sys.argv[1]) as pool:
        print("RAN", pool.isolation_level)
except SandboxUnavailable as exc:
    print("REFUSED", exc)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not HOST.at_least("namespaces") or not shutil.which("setpriv"),
                    reason="simulating a weaker host needs root with every capability and setpriv")
@pytest.mark.parametrize("dropped, minimum, expected", [
    ("-sys_admin", "namespaces", "REFUSED this host grants sandbox isolation 'unprivileged', below the "
                                 "required 'namespaces'"),
    ("-sys_admin", "unprivileged", "RAN unprivileged"),
    ("-sys_admin,-setuid,-setgid", "unprivileged", "REFUSED this host grants sandbox isolation 'process'"),
])
def test_refuses_below_the_minimum(dropped, minimum, expected):
    """A host without CAP_SYS_ADMIN (docker's default) or also without CAP_SETUID is simulated by
    dropping those capabilities from the bounding set before the interpreter starts."""
    out = subprocess.run(["setpriv", f"--bounding-set={dropped}", sys.executable, "-c", REFUSAL_SCRIPT, minimum],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith(expected), out
    if expected.startswith("REFUSED"):
        assert "min_isolation" in out.stdout and "SYS_ADMIN" in out.stdout


def test_close_during_a_batch_answers_every_job():
    import threading

    pool = SandboxPool(workers=1, timeout_s=TIMEOUT_S, min_isolation="process")
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("results", pool.run_batch(
        [StdioJob("import time; time.sleep(30)", [("", "")])] * 6)))
    worker.start()
    time.sleep(0.3)
    pool.close()
    worker.join(timeout=WALL_BOUND_S)
    assert not worker.is_alive(), "run_batch hung after close()"
    assert len(box["results"]) == 6 and not any(r.passed for r in box["results"])
    assert {r.status for r in box["results"]} <= {"timeout", "error"}


def test_clean_shutdown_leaves_nothing(tmp_path):
    with SandboxPool(workers=2, timeout_s=TIMEOUT_S, min_isolation="process", tmp_root=str(tmp_path)) as pool:
        zygotes = pool.zygote_pids
        results = pool.run_batch([GOOD_JOB, StdioJob("import time; time.sleep(30)", [("", "")])])
        assert results[0].passed and results[1].status == "timeout"
    assert list(tmp_path.iterdir()) == []
    assert all(not Path(f"/proc/{pid}").exists() for pid in zygotes)
    with pytest.raises(SandboxError, match="closed"):
        pool.run(GOOD_JOB)


def test_host_isolation_is_reported():
    assert HOST.level in ("process", "unprivileged", "namespaces")
    assert HOST.describe().startswith("sandbox isolation: ")
    if not HOST.at_least("unprivileged"):
        with pytest.raises(SandboxUnavailable, match="min_isolation"):
            SandboxPool(workers=1, min_isolation="unprivileged")


def test_a_killed_zygote_is_replaced_and_cleaned_up(tmp_path):
    import signal

    with SandboxPool(workers=1, timeout_s=TIMEOUT_S, min_isolation="process", tmp_root=str(tmp_path)) as pool:
        (old,) = pool.zygote_pids
        assert len(list(tmp_path.iterdir())) == 1
        os.kill(old, signal.SIGKILL)
        time.sleep(0.1)
        assert pool.run(GOOD_JOB).passed
        assert pool.zygote_pids != [old]
        assert len(list(tmp_path.iterdir())) == 1  # the dead zygote's temp dir is gone, the new one's there
    assert list(tmp_path.iterdir()) == []
