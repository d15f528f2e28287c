"""Run user reward code in a child process, so an exit during scoring is an error, never a success.

A rewards.py that calls ``sys.exit(0)`` or ``os._exit(0)`` while imported or while scoring would
otherwise end ``finetune inspect score`` / ``gate`` with status 0 having written nothing.
Here the work runs in a fresh interpreter (``python -I``: no script dir, no cwd, no
PYTHONPATH, no user site on its path; the plugin's own folder is the one entry added, explicitly),
so a module left in the run directory or the working directory cannot stand in for anything the
reward imports; no state of the parent is inherited. The child reports which reward it is calling
before each call, so when it dies or exits the parent raises a UserError (exit 2) naming that reward.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from finetune.errors import UserError

IMPORT = "(import of rewards.py)"  # what the child is doing before any reward is called


class RewardAborted(UserError):
    """The reward code ended the scoring process (exit 2); the gate voids an earlier PASS on it."""


class RewardExited(BaseException):
    """Raised in the child when reward code raises SystemExit (a BaseException, so no reward catches it)."""

    def __init__(self, reward: str, code: Any):
        super().__init__(reward, code)
        self.reward, self.code = reward, code


class Channel:
    """The child's side: report progress and which reward is running."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.current = IMPORT

    def calling(self, reward: str) -> None:
        if reward != self.current:
            self.current = reward
            self._conn.send(("calling", reward))

    def progress(self) -> None:
        self._conn.send(("progress", None))

    def guard(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` wrapped: announces ``name`` and turns SystemExit into RewardExited."""
        channel = self

        def guarded(*args: Any, **kwargs: Any) -> Any:
            channel.calling(name)
            try:
                return func(*args, **kwargs)
            except SystemExit as exc:
                raise RewardExited(name, exc.code) from None

        guarded.__name__ = getattr(func, "__name__", name)
        return guarded


# The child's whole program: the plugin's folder first on an otherwise isolated path, then the work.
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from finetune.inspect.isolate import _child_main; _child_main(int(sys.argv[2]), int(sys.argv[3]))")


def _child_main(read_fd: int, write_fd: int) -> None:
    """The child side: read (env, cwd, target, args, kwargs) from the parent, run it, send the outcome."""
    with Connection(read_fd, writable=False) as inbox:
        env, cwd, target, args, kwargs = pickle.loads(inbox.recv_bytes())
    _child(Connection(write_fd, readable=False), env, cwd, target, args, kwargs)


def _child(conn: Connection, env: dict[str, str], cwd: str, target: Callable[..., Any], args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> None:
    # the caller's environment, as a plain subprocess would have it (judge endpoints and API keys come from it)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    channel = Channel(conn)
    try:
        result = target(*args, channel=channel, **kwargs)
    except RewardExited as exc:
        conn.send(("exited", (exc.reward, exc.code)))
    except SystemExit as exc:  # at import time, or outside any reward call
        conn.send(("exited", (channel.current, exc.code)))
    except UserError as exc:
        conn.send(("user_error", (exc.what, exc.where, exc.fix)))
    except Exception as exc:
        if not getattr(exc, "agent_code_refused", False):  # a bug: carry the child's traceback to the parent
            conn.send(("crash", traceback.format_exc()))
        else:  # the sandbox cannot run agent-written code here, or it does not import: refused, in one line
            conn.send(("user_error", (str(exc), None, str(getattr(exc, "fix", "")))))
    except BaseException:  # a bug: carry the child's traceback to the parent
        conn.send(("crash", traceback.format_exc()))
    else:
        conn.send(("result", result))
    finally:
        conn.close()


def _start(payload: bytes) -> tuple[subprocess.Popen[bytes], Connection]:
    """The isolated child, fed ``payload``; returns it and the connection its messages arrive on."""
    plugin_root = str(Path(__file__).resolve().parents[2])  # the folder holding the finetune package
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    try:
        # -B: no __pycache__ written into the run dir (a stale .pyc there is one more thing to trust)
        argv = [sys.executable, "-I", "-B", "-c", _BOOT, plugin_root, str(to_child_r), str(from_child_w)]
        proc = subprocess.Popen(argv, pass_fds=(to_child_r, from_child_w), cwd="/", stdin=subprocess.DEVNULL)
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    with Connection(to_child_w, readable=False) as outbox:
        try:
            outbox.send_bytes(payload)
        except OSError:  # died before reading: the EOF below says so
            pass
    return proc, Connection(from_child_r, writable=False)


def run(target: Callable[..., Any], *args: Any, what: str, on_progress: Callable[[], None] | None = None,
        **kwargs: Any) -> Any:
    """``target(*args, channel=Channel, **kwargs)`` in an isolated child process; its return value, or UserError.

    ``target`` and its arguments must be picklable (a module-level function of this plugin). ``what``
    names the reward module in messages (its path).
    """
    proc, recv = _start(pickle.dumps((dict(os.environ), os.getcwd(), target, args, kwargs)))
    current = IMPORT
    outcome: tuple[str, Any] | None = None
    try:
        while outcome is None:
            try:
                kind, payload = recv.recv()
            except EOFError:  # the child died without a word: os._exit, a signal, the OOM killer
                break
            if kind == "calling":
                current = payload
            elif kind == "progress":
                if on_progress:
                    on_progress()
            else:
                outcome = (kind, payload)
    finally:
        recv.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return _outcome(outcome, proc.returncode, current, what)


def _outcome(outcome: tuple[str, Any] | None, exitcode: int | None, current: str, what: str) -> Any:
    fix = "remove the exit from the reward code (a reward must return scores, never end the process)"
    if outcome is None:
        reward = current if current == IMPORT else f"reward '{current}'"
        raise RewardAborted(f"the reward code ended the scoring process (exit status {exitcode}) during {reward}",
                        where=what, fix=fix)
    kind, payload = outcome
    if kind == "result":
        return payload
    if kind == "exited":
        reward, code = payload
        during = reward if reward == IMPORT else f"reward '{reward}'"
        raise RewardAborted(f"the reward code called sys.exit({code!r}) during {during}", where=what, fix=fix)
    if kind == "user_error":
        message, where, fix_ = payload
        raise UserError(message, where=where, fix=fix_)
    raise RuntimeError(f"scoring failed in the child process:\n{payload}")
