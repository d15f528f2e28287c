"""The tool sandbox (`run_python`, the code-running tool of an environment) and the agent host keep secrets in.

Planted in the test's own mount namespace (never the real /run): a Kubernetes service-account token under
/run/secrets (also reached as /var/run/secrets), a Docker secret, and a secret in a top-level directory outside
the system's (/opt). The trusted side of that namespace reads each (control); the model's code through
`run_python` and the agent's code through an AgentHost read none, see no top-level file of the host, no /run,
/var or /etc entry beyond what Python needs, and a minimal /dev (no fuse, no tun, no disks); each system call
the filter denies fails with EPERM from inside (ctypes syscall()).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from finetune.sandbox import runner

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not runner.detect_isolation().at_least("namespaces"),
    reason="planting secrets in a mount namespace of the test's own, and the namespaces level, need root")

LOOK = textwrap.dedent('''
    import ctypes, json, os
    seen = {}
    for path in ("/run/secrets/api", "/var/run/secrets/kubernetes.io/serviceaccount/token", "/opt/secret.txt",
                 "/etc/shadow", "/etc/ssh", "/root/.bashrc"):
        try:
            seen[path] = open(path).read()
        except OSError as exc:
            seen[path] = type(exc).__name__
    nr = __NR__
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {}
    for name in ("io_uring_setup", "bpf", "userfaultfd", "keyctl", "perf_event_open", "setns", "mount"):
        ctypes.set_errno(0)
        calls[name] = (libc.syscall(nr[name], 0, 0, 0, 0, 0), ctypes.get_errno())
    for flag in (0x10000000, 0x40000000, 0x20000, 0x20000000):  # new user, net, mount, pid namespaces
        ctypes.set_errno(0)
        calls[f"unshare:{flag:#x}"] = (libc.unshare(flag), ctypes.get_errno())
    print(json.dumps({"seen": seen, "root": sorted(os.listdir("/")), "etc": sorted(os.listdir("/etc")),
                      "dev": sorted(os.listdir("/dev")), "run": os.listdir("/run"), "var": os.listdir("/var"),
                      "calls": calls}))
''')

SCRIPT = textwrap.dedent('''
    import json, sys
    from finetune.sandbox import runner
    look = sys.argv[1]
    control = open("/run/secrets/api").read() + open("/opt/secret.txt").read()
    tool = json.loads(runner.run_python(look, timeout_s=20))
    host = runner.AgentHost({"rewards_user_look.py": "def look():\\n    import contextlib, io\\n"
                             "    out = io.StringIO()\\n    with contextlib.redirect_stdout(out):\\n"
                             "        exec(compile(%r, 'look', 'exec'), {})\\n    return out.getvalue()\\n" % look})
    with host.session() as s:
        agent = json.loads(s.call("verify", module="rewards_user_look", function="look", timeout_s=30))
    host.close()
    print(json.dumps({"control": control, "tool": tool, "agent": agent}))
''')


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    """What the trusted side, the tool sandbox and the agent host see in a namespace holding planted secrets."""
    secret = "planted-" + os.urandom(6).hex()
    plant = (f"mount -t tmpfs bait /run && mount -t tmpfs bait /opt && "
             f"mkdir -p /run/secrets/kubernetes.io/serviceaccount && echo {secret} > /run/secrets/api && "
             f"echo {secret} > /run/secrets/kubernetes.io/serviceaccount/token && echo {secret} > /opt/secret.txt && "
             'exec "$@"')
    look = LOOK.replace("__NR__", repr(runner._SECCOMP_ARCHES[os.uname().machine][1]))
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", plant, "sh", sys.executable,
                          "-c", SCRIPT, look], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path_factory.mktemp("cwd"))
    assert out.returncode == 0, out.stderr[-3000:]
    return secret, json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("side", ["tool", "agent"])
def test_no_planted_secret_is_readable(views, side):
    secret, seen = views
    assert seen["control"].count(secret) == 2  # the trusted side of that namespace reads them
    got = seen[side]["seen"]
    assert secret not in json.dumps(got)
    assert all(value in ("FileNotFoundError", "PermissionError") for value in got.values()), got
    assert seen[side]["run"] == [] and seen[side]["var"] == ["tmp"]


@pytest.mark.parametrize("side", ["tool", "agent"])
def test_no_top_level_file_and_only_the_systems_directories(views, side):
    _, seen = views
    root = set(seen[side]["root"])
    host_files = {n for n in os.listdir("/") if not os.path.isdir(os.path.join("/", n))}
    assert not root & host_files, root & host_files
    interpreter_tops = {p.split("/")[1] for p in runner._interpreter_paths() if p.startswith("/") and p.count("/") > 1}
    assert root <= set(runner._VIEW_SYSTEM) | {"dev", "etc", "proc", "run", "tmp", "var"} | interpreter_tops, root
    assert "opt" not in root and "sys" not in root and "boot" not in root
    assert set(seen[side]["etc"]) <= set(runner._VIEW_ETC) | {e for e in seen[side]["etc"] if e.startswith("python")}
    assert sorted(seen[side]["dev"]) == sorted([*runner._VIEW_DEVICES, *runner._VIEW_DEV_LINKS, "shm"])


@pytest.mark.parametrize("side", ["tool", "agent"])
def test_each_denied_call_fails_with_eperm_from_inside(views, side):
    _, seen = views
    calls = seen[side]["calls"]
    assert calls and all(rc == -1 and errno == 1 for rc, errno in calls.values()), calls
