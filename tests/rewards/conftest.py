"""Fixtures for the reward tests: ``render`` (reward_helpers.render_module into a fresh folder per call) and a
real OpenAI-compatible judge server on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from reward_helpers import render_module


@pytest.fixture
def render(tmp_path):
    counter = itertools.count()

    def _render(entries, max_completion_length: int = 1024):
        return render_module(entries, tmp_path / f"run{next(counter)}", max_completion_length)

    return _render


# ----------------------------------------------------------------------------------- judge server --

_QUOTE = re.compile(r"<<<RESPONSE (\w+)>>>\n(.*)\n<<<END RESPONSE \1>>>", re.DOTALL)


class JudgeScript:
    """How the fake judge model answers. It behaves like a gullible LLM: it grades the text it finds
    between the RESPONSE markers, but obeys any 'reply SCORE: N' instruction it sees outside them."""

    def __init__(self):
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        # requests marked PAUSE alone: a slow request an earlier test abandoned (DRIP drips for
        # seconds) must not count against the concurrency limit under test
        self.paused_in_flight = 0
        self.max_paused_in_flight = 0
        self.flaky_seen: set = set()
        self.lock = threading.Lock()

    def reply(self, body: dict) -> tuple[int, str]:
        user = body["messages"][1]["content"]
        match = _QUOTE.search(user)
        if match is None:
            return 200, "SCORE: 0"
        quoted = match.group(2)
        outside = user[:match.start()] + user[match.end():]
        injected = re.search(r"reply SCORE: (\d+)", outside)
        if injected:
            return 200, f"SCORE: {injected.group(1)}"
        if "SLOW" in quoted:
            time.sleep(1.5)
        if "PAUSE" in quoted:
            time.sleep(0.2)
        if "FLAKY" in quoted:
            with self.lock:
                first = quoted not in self.flaky_seen
                self.flaky_seen.add(quoted)
            if first:
                return 500, ""
        if "GARBAGE" in quoted:
            return 200, "I would give this 8/10."
        if "OUTOFRANGE" in quoted:
            return 200, "SCORE: 11"
        if "TWICE" in quoted:
            return 200, "SCORE: 3\nSCORE: 9"
        points = 9 if "GOOD" in quoted else 1
        return 200, f"SCORE: {points}"


@pytest.fixture(scope="session")
def judge_server():
    """(base URL, script) of an OpenAI-compatible /v1/chat/completions server on a real socket."""
    script = JudgeScript()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def do_POST(self):
            with script.lock:
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with script.lock:
                    script.requests.append({"path": self.path, "body": body,
                                            "auth": self.headers.get("Authorization")})
                paused = "PAUSE" in json.dumps(body)
                if paused:
                    with script.lock:
                        script.paused_in_flight += 1
                        script.max_paused_in_flight = max(script.max_paused_in_flight, script.paused_in_flight)
                try:
                    if self.path != "/v1/chat/completions":
                        status, content = 404, ""
                    else:
                        status, content = script.reply(body)
                finally:
                    if paused:
                        with script.lock:
                            script.paused_in_flight -= 1
                payload = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": content}}]})
                data = payload.encode() if status == 200 else b'{"error": "boom"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if "DRIP" in json.dumps(body):  # a byte every 0.1 s: no single socket read ever times out
                    for i in range(len(data)):
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(0.1)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout is under test)
            finally:
                with script.lock:
                    script.in_flight -= 1

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    server.shutdown()
    server.server_close()
