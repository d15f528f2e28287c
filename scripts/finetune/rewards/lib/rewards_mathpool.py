"""math-verify in worker processes with a deadline per item — copied verbatim beside rewards.py.

Why: math-verify's own timeouts use signal.alarm, which only works on the main thread (TRL's
accuracy_reward therefore disables them elsewhere, and a pathological expression can hang a
trainer). Here each item runs in a worker process — the whole answer path: reading the completion's final
answer (rewards_answers), the gold, their units, then math-verify — so a worker that overruns its deadline is
killed and restarted, and its item scores None. A batch therefore takes at most about
ceil(items / workers) × timeout, whatever the input.

Protocol: a worker is ``python -I -c BOOT --worker`` running this module's own compiled code, which the
parent sends first on its stdin (8-byte length, then ``marshal`` bytes), followed the same way by the code of
the ``rewards_answers`` module the parent loaded: the worker never re-reads a file (it may have changed since
the parent loaded and hashed it) and finds nothing by module search in the run directory (``-I``: no script
dir, no cwd, no PYTHONPATH, no user site). It then reads one JSON job per line on stdin ({"text", "gold",
"how", "trailing"}) and writes one JSON line {"score": 1.0 | 0.0 | null, "status", "why"}: :func:`score_job`
reads the final answer with ``rewards_answers`` (the last container; hedges, retractions and several
different values refused) and verifies it, all within the job's deadline.
Requires: Python >= 3.10 (POSIX), math-verify, latex2sympy2_extended, and rewards_answers.py beside it.
"""

from __future__ import annotations

import atexit
import json
import marshal
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

_WORD = re.compile(r"(?<![\\A-Za-z])(?=[A-Za-z]*[a-z])[A-Za-z]{3,}")  # prose: 3+ letters, some lower case
# LaTeX whose letters are not prose: text/roman arguments, environment names, \left / \right
_LATEX_WORDS = re.compile(r"\\(?:text|mathrm|textbf|mathbf|operatorname|mbox|begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
STARTUP_TIMEOUT_S = 120.0  # importing sympy on a busy machine can take a while; not part of any deadline
# This module's code as this process compiled it (from the bytes it was loaded from): what a worker runs.
_OWN_CODE = sys._getframe(0).f_code
# A worker's whole program: read the parent's code object from stdin, drop any path entry that names the
# working directory, run it as __main__. Deliberately tiny: nothing here can be swapped on disk.
_BOOT = """import marshal, os, sys
def _take(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("math worker: no code on stdin")
        data += chunk
    return data
sys.path[:] = [p for p in sys.path if p and p != "." and os.path.abspath(p) != os.getcwd()]
__file__ = sys.argv.pop(1)
exec(marshal.loads(_take(int.from_bytes(_take(8), "big"))), globals())
"""


def own_code_blob() -> bytes:
    """What a child process reads on stdin before anything else: this module's code, length-prefixed."""
    blob = marshal.dumps(_OWN_CODE)
    return len(blob).to_bytes(8, "big") + blob


def _answers_code_blob() -> bytes:
    """The code of the rewards_answers module this process loaded (beside rewards.py), length-prefixed."""
    import rewards_answers

    blob = marshal.dumps(rewards_answers.OWN_CODE)
    return len(blob).to_bytes(8, "big") + blob


def _read_stdin(n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("math worker: stdin closed before the answer reader's code")
        data += chunk
    return data


def _install_answers() -> None:
    """In a worker: run the parent's rewards_answers code (sent after this module's) as that module."""
    import types

    module = types.ModuleType("rewards_answers")
    module.__file__ = "rewards_answers.py"
    sys.modules["rewards_answers"] = module
    exec(marshal.loads(_read_stdin(int.from_bytes(_read_stdin(8), "big"))), module.__dict__)


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-u", "-c", _BOOT, os.path.abspath(__file__), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True, cwd="/")
        try:
            stdin = self._pipes()[0]
            stdin.write(own_code_blob() + _answers_code_blob())
            stdin.flush()
        except OSError:  # died at start-up: read_lines sees the EOF and says so
            pass
        self.buffer = b""
        self.ready = False
        self.started = time.monotonic()
        self.job: tuple[int, float] | None = None  # (index, deadline) while busy

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        """The worker's stdin and stdout (both opened as pipes above)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def fileno(self) -> int:
        return self._pipes()[1].fileno()

    def send(self, index: int, job: dict[str, Any], timeout_s: float) -> None:
        stdin = self._pipes()[0]
        stdin.write(json.dumps(job).encode("ascii") + b"\n")
        stdin.flush()
        self.job = (index, time.monotonic() + timeout_s)

    def read_lines(self) -> list[bytes]:
        """Lines completed by the bytes now readable; raises EOFError when the worker died."""
        chunk = os.read(self.fileno(), 65536)
        if not chunk:
            raise EOFError
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return lines

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass
        for stream in self._pipes():
            try:
                stream.close()
            except Exception:
                pass


class MathPool:
    """A fixed number of math-verify worker processes; :meth:`verify` scores a batch with deadlines."""

    def __init__(self, workers: int, timeout_s: float) -> None:
        self.size, self.timeout_s = workers, timeout_s
        self.workers: list[_Worker] = []
        self.lock = threading.Lock()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self.workers[self.workers.index(worker)] = _Worker()

    def verify(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Score jobs (:func:`score_job`'s); returns the reply per job, in order: ``score``, ``status`` ("ok",
        "unusable_gold" (score None: not applicable), "timeout" or "error" (score None)) and ``why``.
        """
        with self.lock:
            while len(self.workers) < self.size:
                self.workers.append(_Worker())
            results: list[Any] = [None] * len(jobs)
            pending = list(range(len(jobs) - 1, -1, -1))
            while pending or any(w.job for w in self.workers):
                now = time.monotonic()
                for worker in list(self.workers):
                    if worker.ready and worker.job is None and pending:
                        index = pending.pop()
                        try:
                            worker.send(index, jobs[index], self.timeout_s)
                        except (BrokenPipeError, OSError):
                            results[index] = {"score": None, "status": "error"}
                            self._replace(worker)
                    elif worker.job is not None and now > worker.job[1]:
                        results[worker.job[0]] = {"score": None, "status": "timeout"}
                        self._replace(worker)
                    elif not worker.ready and now - worker.started > STARTUP_TIMEOUT_S:
                        raise RuntimeError("math-verify worker did not start (is math-verify installed "
                                           f"for {sys.executable}?)")
                deadlines = [w.job[1] for w in self.workers if w.job]
                wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.5
                readable, _, _ = select.select(self.workers, [], [], wait)
                for worker in readable:
                    try:
                        lines = worker.read_lines()
                    except EOFError:
                        if worker.job:
                            results[worker.job[0]] = {"score": None, "status": "error"}
                        if not worker.ready:
                            raise RuntimeError("math-verify worker exited at start-up (is math-verify "
                                               f"installed for {sys.executable}?)") from None
                        self._replace(worker)
                        continue
                    for line in lines:
                        message = json.loads(line)
                        if message.get("ready"):
                            worker.ready = True
                        elif worker.job is not None:
                            results[worker.job[0]] = message
                            worker.job = None
            return results

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.workers = []


_POOLS: dict[tuple[int, float], MathPool] = {}


def get_pool(workers: int, timeout_s: float) -> MathPool:
    """The process-wide pool for these settings (started lazily, stopped at exit)."""
    key = (workers, timeout_s)
    if key not in _POOLS:
        _POOLS[key] = MathPool(workers, timeout_s)
    return _POOLS[key]


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()


# ------------------------------------------------------------------------------- client side --

_AND = re.compile(r"\s*,?\s*(?:\\text\{\s*and\s*\}|\\quad|(?<![A-Za-z\\])and(?![A-Za-z]))\s*")


def gold_value(gold: Any) -> str | None:
    """The gold's answer as written (None when there is none): a gold written as a solution ("... so the
    answer is \\boxed{5}") is read at its final answer container, like a completion."""
    import rewards_answers as answers

    if gold is None or isinstance(gold, (dict, list, bool)) or not str(gold).strip():
        return None
    text = str(gold).strip()
    values, reason = answers.final_answers(text, "any")
    if reason in ("ok", "several_values") and values and answers.containers(text, "any")[0]:
        text = ", ".join(values)
    return text


def gold_text(gold: Any) -> str | None:
    """The gold as the worker should read it (None when there is none): :func:`gold_value` with digits,
    thousands and TeX shorthand normalised and 'a and b' as the set 'a, b'."""
    import rewards_answers as answers

    text = gold_value(gold)
    if text is None:
        return None
    number: str | None = answers.canonical_number(answers.strip_units(text.replace("$", "").strip()))
    if number is not None:  # "$125$ miles", "1,200"
        return number
    text = answers.normalise_latex(answers.unwrap(text, keep_text=True))
    return _AND.sub(", ", text) if re.search(r"\band\b|\\quad", text) else text


def in_gold_unit(value: str, gold_unit: Any) -> str | None:
    """``value`` expressed in the gold's unit (exact conversion), unchanged when either has no unit of the
    table; None when the two units measure different quantities."""
    import rewards_answers as answers

    found = answers.split_unit(value) if gold_unit is not None else None
    if found is None:
        return value
    number, unit = found
    if unit[0] != gold_unit[0]:
        return None
    converted: str = number if unit[1] == gold_unit[1] else answers.in_unit(number, unit[1] / gold_unit[1])
    return converted


def answer_job(text: str, how: str, trailing: str, gold_unit: Any = None) -> tuple[dict[str, Any] | None, str]:
    """(job fields or None, reason id): what the worker should verify for one completion; an answer whose
    unit measures another quantity than ``gold_unit`` (:func:`rewards_answers.split_unit`) is refused."""
    import rewards_answers as answers

    values, reason = answers.final_answers(text, how, trailing)
    if gold_unit is not None and reason in ("ok", "several_values"):
        converted = [in_gold_unit(v, gold_unit) for v in values]
        if any(v is None for v in converted):
            return None, "unit_mismatch"
        values = [v for v in converted if v is not None]
    if reason == "no_container" and how == "any":
        whole = answers.shown(text)  # no container at all: let math-verify search the shown text
        return ({"answer": answers.normalise_latex(whole), "mode": "any", "several": False} if whole else None,
                "ok" if whole else "no_container")
    if reason not in ("ok", "several_values"):
        return None, reason
    values = [answers.normalise_latex(answers.strip_units(v)) for v in values]
    return {"answer": "\\boxed{" + ", ".join(values) + "}", "mode": "boxed", "several": len(values) > 1}, reason


def _no_gold(gold: Any) -> bool:
    """True when there is no gold to read (what :func:`gold_value` returns None for), decided without parsing."""
    return gold is None or isinstance(gold, (dict, list, bool)) or not str(gold).strip()


def math_scores(texts: list[str], golds: list[Any], how: str, workers: int, timeout_s: float, skip: list[bool],
                trailing: str = "allow") -> tuple[list[float | None], int, list[str], int]:
    """(scores, errors, whys, unusable): 1.0 / 0.0 / None per row, rows that errored or timed out, the
    reason id per row and the rows whose gold no reading accounts for (None: not applicable). Every row with a
    gold and a well-formed completion is one worker job, read and verified within ``timeout_s``."""
    scores: list[float | None] = [None] * len(texts)
    whys: list[str] = ["ok"] * len(texts)
    jobs: list[dict[str, Any]] = []
    where: list[int] = []
    for i, (text, gold) in enumerate(zip(texts, golds)):
        if _no_gold(gold):
            whys[i] = "no_gold"
        elif skip[i]:
            scores[i], whys[i] = 0.0, "format_failed"
        else:
            jobs.append({"text": text, "gold": str(gold), "how": how,
                         "trailing": trailing})
            where.append(i)
    errors = unusable = 0
    if jobs:
        for i, reply in zip(where, get_pool(workers, timeout_s).verify(jobs)):
            scores[i], status = reply["score"], reply["status"]
            if status in ("timeout", "error"):
                errors += 1
                whys[i] = status
            elif status == "unusable_gold":
                unusable += 1
                whys[i] = status
            else:
                whys[i] = reply.get("why") or "ok"
    return scores, errors, whys, unusable


def score_job(job: dict[str, Any], verify_answer: Callable[[str, dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """A worker's whole answer path for one row: the gold and the completion's final answer read (units
    converted to the gold's), two plain decimals compared exactly, anything else verified by ``verify_answer``
    (gold text, answer job) -> reply. Returns {"score", "status", "why"}."""
    import rewards_answers as answers

    gold = gold_text(job["gold"])
    if gold is None:
        return {"score": None, "status": "ok", "why": "no_gold"}
    written = gold_value(job["gold"])
    found = answers.split_unit(written) if written is not None else None
    answer, why = answer_job(job["text"], job["how"], job["trailing"], found[1] if found else None)
    if answer is None:
        return {"score": 0.0, "status": "ok", "why": why}
    decided = _same_decimal(gold, answer)
    if decided is not None:  # two plain decimals: equal exactly, never within math-verify's rounding
        return {"score": decided, "status": "ok", "why": "ok" if decided else "not_equal"}
    reply = verify_answer(gold, answer)
    if reply.get("status") == "ok" and reply.get("score") == 0.0:
        reply["why"] = "several_values" if why == "several_values" else "not_equal"
    return reply


def _same_decimal(gold: str, job: dict[str, Any]) -> float | None:
    """1.0 / 0.0 when the gold and the single answer are both plain decimal numbers, compared exactly; None
    otherwise (math-verify decides). math-verify rounds floats to 6 decimal places, so 3.1415929 would pass
    for 3.1415927 and 5.0000001 for 5; two written decimals are equal only when they are the same value
    (3600.0 = 3,600 = 3.6e3 all reach here as 3600)."""
    import rewards_answers as answers

    if job["mode"] != "boxed" or job["several"]:
        return None
    answer = answers.canonical_number(job["answer"][len("\\boxed{"):-1])
    if answer is None or answers.canonical_number(gold) is None:
        return None
    return 1.0 if answer == answers.canonical_number(gold) else 0.0


# ------------------------------------------------------------------------------- worker side --

def _worker_main() -> None:
    import logging

    _install_answers()
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    # Deadlines are enforced by the parent (this process is killed), so math-verify's own
    # signal-based timeouts are off and its "timeout disabled" warnings are noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    boxed_first = LatexExtractionConfig(normalization_config=NormalizationConfig(units=True),
                                        boxed_match_priority=0, try_extract_without_anchor=False)
    configs = {
        "boxed": [boxed_first],
        # no answer container at all: math-verify's own search of the shown text (anchored LaTeX first)
        "any": [LatexExtractionConfig(normalization_config=NormalizationConfig(units=True)), ExprExtractionConfig()],
        "answer_tag": [LatexExtractionConfig(normalization_config=NormalizationConfig(units=True)),
                       ExprExtractionConfig()],
    }
    gold_cache: dict[str, list[Any]] = {}

    def verify_answer(gold: str, job: dict[str, Any]) -> dict[str, Any]:
        if gold not in gold_cache:
            if len(gold_cache) > 4096:
                gold_cache.clear()
            gold_cache[gold] = _read_gold(gold, parse)
        gold_parsed = gold_cache[gold]
        if not gold_parsed:
            return {"score": None, "status": "unusable_gold"}
        if job.get("several") and not _several_values(gold_parsed):
            return {"score": 0.0, "status": "ok"}  # several different answers for a single gold: a hedge
        answer = parse(job["answer"], extraction_config=configs[job["mode"]], extraction_mode="first_match",
                       parsing_timeout=None)
        return {"score": float(verify(gold_parsed, answer, timeout_seconds=None)) if answer else 0.0,
                "status": "ok"}

    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            reply = score_job(json.loads(line), verify_answer)
        except Exception:
            reply = {"score": None, "status": "error"}
        out.write(json.dumps(reply).encode("ascii") + b"\n")
        out.flush()


def _read_gold(gold: str, parse: Callable[..., list[Any]]) -> list[Any]:
    """The gold parsed WHOLE, or [] when no reading accounts for all of it.

    Plain LaTeX ("10\\sqrt{2}", "[-2, 7]", "3, 5, 7") is read as one math expression first: an
    unanchored parse would pick its last number (10, 7, 7) and credit a partial answer. Prose is
    read unanchored, and only kept when the extracted expression is the whole gold.
    """
    if not _WORD.search(_LATEX_WORDS.sub(" ", gold)):
        parsed = parse(f"${gold}$", parsing_timeout=None)
        if parsed:
            return parsed
    parsed = parse(gold, parsing_timeout=None)
    if parsed and len(parsed) > 1 and _squash(parsed[-1]) == _squash(gold):
        return parsed
    return []


def _squash(text: object) -> str:
    return re.sub(r"[\s$]|\\[,;! ]", "", str(text))


def _several_values(parsed: list[Any]) -> bool:
    """The gold names several values (a set, an interval's endpoints, ±): several boxes may name them."""
    from sympy import FiniteSet, Interval

    return any(isinstance(p, (FiniteSet, Interval)) and not getattr(p, "is_empty", False) for p in parsed[:1])


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker_main()
