"""The sandbox's system-call filter (classic BPF built by hand, no libseccomp): every denied call on both ABIs the
filter knows (x86-64 and the DGX Spark's aarch64), checked by running the program on seccomp_data; the tables
against the kernel headers where installed; and, live at the namespaces level, each denied call made through
ctypes fails with EPERM inside the sandbox while ordinary Python (imports, threads, subprocess, multiprocessing,
asyncio, numpy) still works."""

from __future__ import annotations

import re
import struct
import textwrap
from pathlib import Path

import pytest

from finetune.sandbox import runner
from finetune.sandbox.runner import ExecJob, SandboxPool, detect_isolation

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, CLONE_FILES, SIGCHLD = 0x10000000, 0x40000000, 0x20000, 0x400, 17
HOST = detect_isolation()
namespaces = pytest.mark.skipif(not HOST.at_least("namespaces"),
                                reason=f"the filter applies at the namespaces level; this host: {HOST.notes}")


def run_filter(program: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0) -> int:
    """The kernel's evaluation of the filter on one seccomp_data (the subset of classic BPF it uses)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x35, 0x45):  # jeq / jge / jset
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", sorted(runner._SECCOMP_ARCHES))
def test_the_filter_denies_every_listed_call_on_both_abis(machine):
    program = runner._seccomp_program()
    assert all(jt < 256 and jf < 256 for _, jt, jf, _ in program)
    audit, nr = runner._SECCOMP_ARCHES[machine]
    for name in runner._SECCOMP_DENIED:
        assert run_filter(program, audit, nr[name]) == EPERM, name
    for name in ("clone", "unshare"):
        for flag in (CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, 0x80):  # 0x80: CLONE_NEWTIME
            assert run_filter(program, audit, nr[name], flag | SIGCHLD) == EPERM, (name, hex(flag))
    assert run_filter(program, audit, nr["clone"], SIGCHLD) == ALLOW  # fork
    assert run_filter(program, audit, nr["clone"], 0x3D0F00) == ALLOW  # pthread_create's flags
    assert run_filter(program, audit, nr["unshare"], CLONE_FILES) == ALLOW
    assert run_filter(program, audit, nr["clone3"]) == ENOSYS  # the C library falls back to clone
    assert run_filter(program, audit, 0) == ALLOW and run_filter(program, audit, 63) == ALLOW  # read, uname
    assert run_filter(program, 0x40000003, 1) == ENOSYS  # i386 through int 0x80
    assert run_filter(program, audit, nr["flock"]) == ALLOW  # model code's own locks in its scratch
    agent = runner._seccomp_program(runner._SECCOMP_DENIED_AGENT)  # agent code also sees the run folder
    assert run_filter(agent, audit, nr["flock"]) == EPERM and run_filter(agent, audit, nr["bpf"]) == EPERM
    if machine == "x86_64":
        assert run_filter(program, audit, 0x40000000 | 425) == ENOSYS  # x32 numbers


@pytest.mark.parametrize("machine, headers", [
    ("x86_64", ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h")),
    ("aarch64", ("/usr/include/asm-generic/unistd.h",))])
def test_the_tables_match_the_kernel_headers(machine, headers):
    path = next((Path(h) for h in headers if Path(h).is_file()), None)
    if path is None:
        pytest.skip(f"no kernel header installed ({', '.join(headers)})")
    text = path.read_text()
    for name, nr in runner._SECCOMP_ARCHES[machine][1].items():
        found = re.search(rf"#define __NR(?:3264)?_{name}\s+(\d+)\b", text)
        assert found and int(found.group(1)) == nr, name


PROBE = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {nr!r}
    def call(n, *args):
        ctypes.set_errno(0)
        rc = libc.syscall(n, *[ctypes.c_ulong(a) for a in args])
        if rc == 0 and n == nr["clone"]:
            os._exit(0)  # a clone that worked: the child leaves at once
        return rc, ctypes.get_errno()
    out = {{name: call(nr[name], 0, 0, 0, 0, 0) for name in {denied!r}}}
    for name in ("unshare", "clone"):
        for flag in (0x10000000, 0x40000000, 0x20000):
            out[f"{{name}}:{{flag:#x}}"] = call(nr[name], flag | 17, 0, 0, 0, 0)
    out["clone3"] = call(nr["clone3"], 0, 0)
    status = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")]
    print(repr((out, status)))
""")


@namespaces
def test_each_denied_call_fails_inside_the_sandbox():
    import ast
    import os

    machine = os.uname().machine
    nr = runner._SECCOMP_ARCHES[machine][1]
    code = PROBE.format(nr=nr, denied=list(runner._SECCOMP_DENIED))
    with SandboxPool(workers=1, timeout_s=10, memory_mb=512) as pool:
        run = pool.execute(ExecJob(code))
    assert run.status == "ok", run
    results, status = ast.literal_eval(run.stdout.strip())
    assert status == ["2"]  # filter mode
    assert {name: errno for name, (rc, errno) in results.items() if name != "clone3"} == \
        {name: 1 for name in results if name != "clone3"}  # every one EPERM
    assert all(rc == -1 for rc, _ in results.values())
    assert results["clone3"] == (-1, 38)


ORDINARY = textwrap.dedent("""
    import asyncio, ctypes, decimal, json, multiprocessing, sqlite3, subprocess, sys, threading
    box = []
    t = threading.Thread(target=lambda: box.append(sum(range(10))))
    t.start(); t.join()
    sub = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout.strip()
    with multiprocessing.get_context("fork").Pool(2) as p:
        squares = p.map(abs, [-1, -2, -3])
    db = sqlite3.connect(":memory:")
    rows = db.execute("select 1 + 1").fetchall()
    loop = asyncio.run(asyncio.sleep(0, result="async"))
    try:
        import numpy
        np_ok = int(numpy.arange(5).sum())
    except ImportError:
        np_ok = 10
    open("/dev/null", "w").write("x")
    print(box[0], sub, squares, rows[0][0], loop, np_ok, str(decimal.Decimal("1.5")), json.dumps([1]))
""")


@namespaces
def test_ordinary_python_still_works_inside_the_sandbox():
    with SandboxPool(workers=1, timeout_s=20, memory_mb=1024) as pool:
        run = pool.execute(ExecJob(ORDINARY, timeout_s=20))
    assert run.status == "ok", run
    assert run.stdout.split() == ["45", "42", "[1,", "2,", "3]", "2", "async", "10", "1.5", "[1]"]
