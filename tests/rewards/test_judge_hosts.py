"""No secret leaves without the person: a judge reward sends prompts, completions and its key only to a host
the person allowed (FINETUNE_JUDGE_HOSTS in their own shell; loopback without it), never follows a redirect,
and the rendered reward says which host it calls. Real listeners on 127.0.0.1 only."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

RUBRIC = "10: the answer is GOOD. 0: anything else."


class _Listener(BaseHTTPRequestHandler):
    """Records every request (path, Authorization header); redirects when told to."""

    seen: list = []
    redirect_to: str | None = None

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if self.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.redirect_to)
            self.end_headers()
            return
        body = b'{"choices": [{"message": {"content": "SCORE: 10"}}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def listener():
    servers = []

    def start(redirect_to: str | None = None):
        handler = type("L", (_Listener,), {"seen": [], "redirect_to": redirect_to})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_port, handler

    yield start
    for s in servers:
        s.shutdown()


def _judge(render, url: str):
    return render([{"name": "rubric", "type": "judge", "endpoint": url, "model": "m", "rubric": RUBRIC,
                    "timeout_s": 2.0, "retries": 1, "concurrency": 1, "cache": False, "api_key_env": "JUDGE_KEY"}])


def test_the_key_goes_only_to_an_allowed_host(render, listener, monkeypatch):
    port, seen = listener()
    monkeypatch.setenv("JUDGE_KEY", "sekret")
    monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", "judge.example.org")  # the person allowed another host only
    mod = _judge(render, f"http://127.0.0.1:{port}/v1")
    assert mod.rubric(prompts=["p"], completions=["GOOD"]) == [None] and seen.seen == []  # nothing sent
    monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", "judge.example.org, 127.0.0.1")
    assert mod.rubric(prompts=["p"], completions=["GOOD"]) == [1.0]
    assert seen.seen == [("/v1/chat/completions", "Bearer sekret")]


def test_without_an_allowlist_only_loopback(render, listener, monkeypatch):
    port, seen = listener()
    monkeypatch.setenv("JUDGE_KEY", "sekret")
    monkeypatch.delenv("FINETUNE_JUDGE_HOSTS", raising=False)
    assert _judge(render, f"http://127.0.0.1:{port}/v1").rubric(prompts=["p"], completions=["GOOD"]) == [1.0]
    # a host the person never named: refused before any connection (the name is never even resolved)
    remote = _judge(render, "http://judge.invalid:9/v1")
    assert remote.rubric(prompts=["p"], completions=["GOOD"]) == [None]


def test_a_redirect_never_carries_the_key_elsewhere(render, listener, monkeypatch):
    other_port, other = listener()
    port, first = listener(redirect_to=f"http://localhost:{other_port}/v1/chat/completions")
    monkeypatch.setenv("JUDGE_KEY", "sekret")
    monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", "127.0.0.1")
    assert _judge(render, f"http://127.0.0.1:{port}/v1").rubric(prompts=["p"], completions=["GOOD"]) == [None]
    assert len(first.seen) >= 1 and other.seen == []


def test_the_rendered_reward_says_which_host_it_calls(render, tmp_path):
    mod = _judge(render, "https://judge.example.org:8443/v1")
    doc = mod.rubric.__doc__
    assert "Calls host judge.example.org only" in doc and "$JUDGE_KEY" in doc, doc
