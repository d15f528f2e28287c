"""The agent host: agent-written modules (a verifier, an environment, their own modules) run in a sandboxed
interpreter, never in the trusted process. Inside: no environment variable but those allowed, no write that
persists, no network, the run folder readable; a call past its limit is stopped; a module that does not import
is refused; and an environment's stand-in class gives TRL exactly the real tools' schemas. A host that cannot
build the sandbox refuses (simulated with a container's limits: no CAP_SYS_ADMIN and a filter denying
namespaces, as Docker's default profile does)."""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from finetune.sandbox import runner
from finetune.sandbox.runner import AgentCallError, AgentCodeRefused, AgentHost, AgentTimeout

VERIFIER = textwrap.dedent('''
    import os, socket
    from rules import norm

    def check(completion, prompt="", expected=None, **_):
        return float(norm(completion) == expected)

    def probe(what, target=""):
        """What the code can reach: a variable, a file to read, a file to write, a connection."""
        try:
            if what == "env":
                return os.environ.get(target)
            if what == "read":
                return open(target).read()
            if what == "write":
                with open(target, "w") as fh:
                    fh.write("pwned")
                return "written"
            if what == "connect":
                socket.create_connection(("127.0.0.1", int(target)), timeout=1).close()
                return "connected"
            if what == "sleep":
                import time
                time.sleep(30)
            if what == "exit":
                raise SystemExit(3)
            if what == "die":
                os._exit(3)
            if what == "listdir":
                return sorted(os.listdir(target))
            if what == "flock":
                import fcntl
                fcntl.flock(os.open(target, os.O_RDONLY), fcntl.LOCK_EX)
                return "locked"
        except OSError as exc:
            return f"denied: {type(exc).__name__}"
''')
RULES = "def norm(text):\n    return text.strip()\n"


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agent-run")
    (folder / "data.txt").write_text("readable")
    os.chmod(folder, 0o755)
    (folder / "data.txt").chmod(0o644)
    h = AgentHost({"rewards_user_v.py": VERIFIER, "rewards_lib_rules.py": RULES}, folder=str(folder),
                  allow_env=("AGENT_ALLOWED",))
    old = {k: os.environ.get(k) for k in ("HF_TOKEN", "AGENT_ALLOWED")}
    os.environ.update(HF_TOKEN="hf_" + secrets.token_hex(8), AGENT_ALLOWED="yes")
    try:
        h.start()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    yield h, folder
    h.close()


def probe(host, *args, timeout_s=10.0):
    with host.session() as s:
        return s.call("verify", module="rewards_user_v", function="probe", args=list(args), timeout_s=timeout_s)


def test_the_verifier_scores_with_its_own_module(host):
    h, _ = host
    with h.session() as s:
        got = [s.call("verify", module="rewards_user_v", function="check", args=[c], kwargs={"expected": "7"},
                      timeout_s=10) for c in (" 7", "8")]
    assert got == [1.0, 0.0]
    assert "rules" not in sys.modules and "rewards_user_v" not in sys.modules  # never imported here


def test_only_the_allowed_variables_reach_it(host):
    h, _ = host
    assert probe(h, "env", "AGENT_ALLOWED") == "yes"
    assert probe(h, "env", "HF_TOKEN") is None and probe(h, "env", "PATH") == runner._SAFE_PATH


def test_it_reads_the_run_folder_and_writes_nothing_that_persists(host):
    h, folder = host
    tag = secrets.token_hex(4)
    assert probe(h, "read", str(folder / "data.txt")) == "readable"
    assert probe(h, "write", str(folder / f"x-{tag}")) == "denied: OSError"  # read-only
    assert probe(h, "write", f"/tmp/x-{tag}") == "written"  # scratch, gone with the session
    assert probe(h, "read", f"/tmp/x-{tag}") == "denied: FileNotFoundError"  # a fresh process, a fresh /tmp
    assert not (folder / f"x-{tag}").exists() and not Path(f"/tmp/x-{tag}").exists()
    assert probe(h, "read", str(Path.home() / ".bashrc")).startswith("denied")
    assert probe(h, "read", "/etc/shadow").startswith("denied")
    assert probe(h, "flock", str(folder)) == "denied: PermissionError"  # the plugin's run lock is out of reach


def test_it_has_no_network(host):
    h, _ = host
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.3)
    try:
        assert probe(h, "connect", str(listener.getsockname()[1])).startswith("denied")
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_a_runaway_or_exiting_call_is_stopped_and_the_next_gets_a_fresh_process(host):
    h, _ = host
    with h.session(renew=True) as s:
        with pytest.raises(AgentTimeout):
            s.call("verify", module="rewards_user_v", function="probe", args=["sleep"], timeout_s=0.5)
        with pytest.raises(AgentCallError, match="3"):  # SystemExit inside a call: an error, the process lives
            s.call("verify", module="rewards_user_v", function="probe", args=["exit"], timeout_s=5)
        with pytest.raises(AgentCallError, match="ended"):
            s.call("verify", module="rewards_user_v", function="probe", args=["die"], timeout_s=5)
        assert s.call("verify", module="rewards_user_v", function="check", args=["7"], kwargs={"expected": "7"},
                      timeout_s=5) == 1.0
    with h.session() as episode:  # an episode's process that died stays dead: its state went with it
        with pytest.raises(AgentCallError):
            episode.call("verify", module="rewards_user_v", function="probe", args=["die"], timeout_s=5)
        with pytest.raises(AgentCallError, match="ended"):
            episode.call("verify", module="rewards_user_v", function="check", args=["7"], timeout_s=5)


def test_a_module_that_does_not_import_is_refused_naming_it(tmp_path):
    bad = AgentHost({"rewards_user_v.py": "import os\nopen(os.path.join(os.path.dirname(__file__), 'x'), 'w')\n"},
                    folder=str(tmp_path))
    try:
        with pytest.raises(AgentCodeRefused, match=r"rewards_user_v\.py: (OSError|PermissionError).*(Read-only|Permission denied)"):
            bad.start()
    finally:
        bad.close()
    assert not (tmp_path / "x").exists()


FORGER = textwrap.dedent('''
    from finetune.inspect import verdicts

    verdicts.confirm({folder!r}, "Ada Lovelace", None)  # the person's act, forged at import
''')


def test_a_verifier_cannot_forge_the_persons_confirmation_at_import(tmp_path):
    """The critical finding, at the host: the plugin's own confirm() called by the agent's module fails in the
    sandbox (its run lock denied, the folder read-only) and nothing is written."""
    from finetune.inspect.verdicts import confirm

    control = tmp_path / "control"
    control.mkdir()
    (control / "verdicts.jsonl").write_text('{"id": "s1", "accept": true, "reader": "agent", "time": "t"}\n')
    run = tmp_path / "run"
    shutil.copytree(control, run)
    os.chmod(run, 0o777)  # even a folder anyone may write stays unwritten: the sandbox's view is read-only
    confirm(control, "Ada Lovelace", None)  # what the same call does outside the sandbox
    assert (control / "confirmation.json").exists()
    before = sorted(p.name for p in run.iterdir())
    host = AgentHost({"rewards_user_v.py": FORGER.format(folder=str(run))}, folder=str(run))
    try:
        with pytest.raises(AgentCodeRefused, match=r"rewards_user_v\.py: \w+Error"):
            host.start()
    finally:
        host.close()
    assert sorted(p.name for p in run.iterdir()) == before


ENV = textwrap.dedent('''
    from __future__ import annotations

    import enum
    from typing import Literal, Optional

    class Unit(enum.Enum):
        CM = "cm"
        INCH = "in"

    class Shop:
        """A shop with tools of every shape a schema may take."""

        def reset(self, **row):
            self.calls = []
            return f"hello {row.get('prompt', '')}"

        def buy(self, item: str, count: int = 1, note: Optional[str] = None) -> str:
            """Buy something.

            Args:
                item: what to buy (choices: ["apple", "pear"])
                count: how many
                note: a note for the cashier
            """
            self.calls.append(item)
            return f"{count} x {item}"

        def measure(self, sizes: list[float], unit: Unit, table: dict[str, int], pair: tuple[int, str],
                    mode: Literal["fast", "slow"] = "fast", *, flag: bool = False) -> dict:
            """Measure things.

            Args:
                sizes: the sizes
                unit: the unit
                table: a table
                pair: a pair
                mode: how
                flag: a flag
            """
            return {"n": len(sizes)}

        async def wait(self, seconds: float | int) -> str:
            """Wait a while.

            Args:
                seconds: how long
            """
            return "waited"

        @staticmethod
        def echo(text: str) -> str:
            """Echo.

            Args:
                text: the text
            """
            return text

        def fail(self, x: int) -> str:
            """Fail loudly.

            Args:
                x: anything
            """
            raise ValueError(f"no {x} today")

        def _private(self):
            return 1

        def get_reward(self):
            return float(len(self.calls))
''')


def test_the_environment_stand_in_gives_trl_the_same_tools_and_schemas(tmp_path):
    from transformers.utils import get_json_schema

    host = AgentHost({"rewards_env.py": ENV}, folder=str(tmp_path))
    try:
        proxy = runner.environment_class(host, "rewards_env", "Shop")()
        namespace: dict = {"__name__": "real_env"}
        exec(compile(ENV, "real_env.py", "exec"), namespace)
        real = namespace["Shop"]()

        def tools(env):  # as TRL 1.16 lists them (GRPOTrainer.__init__: inspect.getmembers on the class)
            return [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
                    if n not in ("reset", "get_reward") and not n.startswith("_")]

        assert tools(proxy) == tools(real) == ["buy", "echo", "fail", "measure", "wait"]
        for name in tools(real):
            assert get_json_schema(getattr(proxy, name)) == get_json_schema(getattr(real, name)), name
            assert inspect.iscoroutinefunction(getattr(proxy, name)) == inspect.iscoroutinefunction(
                getattr(real, name))
        assert proxy.get_reward is None  # hidden from TRL's probe, as before
        assert proxy.reset(prompt="Q") == "hello Q"
        assert proxy.buy("apple", count=2) == "2 x apple" and proxy.echo("hi") == "hi"
        assert asyncio.run(proxy.wait(1)) == "waited"
        with pytest.raises(AgentCallError) as raised:
            proxy.fail(3)
        assert str(raised.value) == "no 3 today"  # TRL sends str(e) back to the model: the same text
        assert proxy._finetune_get_reward() == 1.0
        proxy.reset(prompt="again")  # a fresh instance: nothing of the last episode
        assert proxy._finetune_get_reward() == 0.0
    finally:
        host.close()


REFUSAL = textwrap.dedent('''
    import json, os, sys
    from finetune.sandbox import runner
    runner._apply_seccomp()  # what a container's profile does: no namespaces for anyone in it
    host = runner.AgentHost({"rewards_user_v.py": "open(%r, 'w').write('ran')\\n"}, folder=%r)
    try:
        host.start()
        print("STARTED")
    except runner.AgentCodeRefused as exc:
        print("REFUSED", exc, "|", exc.fix)
    finally:
        host.close()
''')


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_a_host_that_cannot_build_the_sandbox_refuses(tmp_path):
    marker = tmp_path / "ran"
    script = REFUSAL % (str(marker), str(tmp_path))
    out = subprocess.run(["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("REFUSED cannot start the sandbox for agent-written code: "), out
    assert "Operation not permitted" in out.stdout and "user namespaces" in out.stdout
    assert not marker.exists()  # the code never ran, sandboxed or not


USERNS = textwrap.dedent('''
    import json, os
    from finetune.sandbox import runner
    host = runner.AgentHost({"rewards_user_v.py": %r, "rewards_lib_rules.py": %r}, folder=%r)
    with host.session() as s:
        call = lambda *a: s.call("verify", module="rewards_user_v", function="probe", args=list(a), timeout_s=20)
        out = {"score": s.call("verify", module="rewards_user_v", function="check", args=[" 7"],
                               kwargs={"expected": "7"}, timeout_s=20),
               "write": call("write", %r), "env": call("env", "HF_TOKEN"), "root": call("listdir", "/"),
               "uid_map": call("read", "/proc/self/uid_map").split()}
    host.close()
    print(json.dumps(out))
''')


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_without_cap_sys_admin_a_user_namespace_of_its_own_builds_the_same_box(tmp_path):
    """Root without CAP_SYS_ADMIN (or any user, where user namespaces are allowed) takes the user-namespace path:
    the same view, filter and results, every capability dropped inside."""
    import json

    os.chmod(tmp_path, 0o755)
    script = USERNS % (VERIFIER, RULES, str(tmp_path), str(tmp_path / "pwned"))
    out = subprocess.run(["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c", script], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "HF_TOKEN": "hf_secret"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["score"] == 1.0 and got["write"] == "denied: OSError" and got["env"] is None
    assert "work" not in got["root"] or "work" in {p.split("/")[1] for p in runner._interpreter_paths()}
    assert got["uid_map"] == ["0", "0", "1"]  # its own user namespace, this uid only
    assert not (tmp_path / "pwned").exists()
