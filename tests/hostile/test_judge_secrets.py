"""A judge's API key reaches only the host the person allowed, and only from a variable they allowed.

Reproductions: with ``http_proxy`` set, urllib's default opener sent the request, bearer key included, to the proxy
(even for a loopback judge); ``api_key_env`` could name any variable (HF_TOKEN, cloud keys). Now the rendered judge
opens with a proxy handler of its own (none unless the person names one: userConfig ``judge_proxy`` or
``FINETUNE_JUDGE_PROXY``), and ``rewards render`` refuses an ``api_key_env`` the person did not allow (userConfig
``judge_key_envs`` or ``FINETUNE_JUDGE_KEY_ENVS``). The plugin's guard keeps the userConfig values in the person's
folder for the commands (hooks/guard.py ``sync_settings``). Real listeners on 127.0.0.1 only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


class _Listener(BaseHTTPRequestHandler):
    seen: list = []

    def _answer(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b'{"choices": [{"message": {"content": "SCORE: 10"}}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = _answer  # noqa: N815
    do_CONNECT = _answer  # noqa: N815

    def log_message(self, *a):
        pass


@pytest.fixture
def listeners():
    servers = []

    def start():
        handler = type("L", (_Listener,), {"seen": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_port, handler

    yield start
    for s in servers:
        s.shutdown()


@pytest.fixture
def person(tmp_path, monkeypatch):
    """A person's own config folder for this test (their settings.json is written here, not the session's)."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("FINETUNE_JUDGE_HOSTS", "FINETUNE_JUDGE_KEY_ENVS", "FINETUNE_JUDGE_PROXY", "http_proxy",
                 "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return home / "llm-finetuning"


@pytest.fixture
def judge_spec(base_run, tmp_path):
    """set(endpoint, key) -> spec path: the hostile suite's run with a judge reward."""
    run = tmp_path / "run"
    shutil.copytree(base_run, run)

    def set_judge(endpoint: str, key: str) -> Path:
        data = yaml.safe_load((run / "spec.yaml").read_text())
        data["rewards"] = data["rewards"][:2] + [{"name": "rubric", "type": "judge", "endpoint": endpoint,
                                                   "model": "m", "rubric": "10: right. 0: wrong.", "retries": 0,
                                                   "timeout_s": 5.0, "cache": False, "api_key_env": key,
                                                   "weight": 0.1}]
        (run / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return run / "spec.yaml"

    return set_judge


def _load(rewards: Path):
    spec = importlib.util.spec_from_file_location(f"judge_rewards_{id(rewards)}", rewards)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("key", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "HOME", "OPENAI_API_KEY"])
def test_render_refuses_a_key_variable_the_person_did_not_allow(judge_spec, cli, person, key):
    spec = judge_spec("http://127.0.0.1:9/v1", key)
    before = {p.name: p.read_bytes() for p in spec.parent.iterdir() if p.is_file()}
    r = cli("rewards", "render", spec)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "rewards[2].api_key_env" in r.err, r
    assert key in r.err and "judge_key_envs" in r.err
    assert {p.name: p.read_bytes() for p in spec.parent.iterdir() if p.is_file()} == before


def test_the_persons_settings_from_userconfig_allow_a_host_and_a_key(judge_spec, cli, person):
    """The guard writes the person's userConfig where the commands read it; the agent's own command line cannot."""
    spec = judge_spec("https://judge.example.org/v1", "OPENAI_API_KEY")
    assert cli("rewards", "render", spec).code == 2  # not allowed yet
    env = {"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(person.parent), "HOME": str(person.parent),
           "CLAUDE_PLUGIN_OPTION_JUDGE_HOSTS": "judge.example.org", "CLAUDE_PLUGIN_OPTION_JUDGE_KEY_ENVS":
           "OPENAI_API_KEY", "CLAUDE_PLUGIN_OPTION_JUDGE_PROXY": ""}
    call = {"tool_name": "Read", "tool_input": {"file_path": "README.md"}, "cwd": str(spec.parent),
            "hook_event_name": "PreToolUse"}
    proc = subprocess.run(["/bin/sh", str(ROOT / "hooks" / "guard.sh")], input=json.dumps(call), text=True,
                          capture_output=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((person / "settings.json").read_text()) == {
        "judge_hosts": ["judge.example.org"], "judge_key_envs": ["OPENAI_API_KEY"], "judge_proxy": ""}
    r = cli("rewards", "render", spec)
    assert r.code == 0, r
    assert "Calls host judge.example.org only" in (spec.parent / "rewards.py").read_text()


def test_no_proxy_sees_the_key_unless_the_person_names_it(judge_spec, cli, person, listeners, monkeypatch):
    judge_port, judge = listeners()
    proxy_port, proxy = listeners()
    monkeypatch.setenv("FINETUNE_JUDGE_KEY_ENVS", "JUDGE_API_KEY")
    monkeypatch.setenv("JUDGE_API_KEY", "sekret")
    spec = judge_spec(f"http://127.0.0.1:{judge_port}/v1", "JUDGE_API_KEY")
    assert cli("rewards", "render", spec).code == 0
    mod = _load(spec.parent / "rewards.py")
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy_port}")
    monkeypatch.delenv("no_proxy", raising=False)
    assert mod.rubric(prompts=["p"], completions=["<answer>42</answer>"]) == [1.0]
    assert proxy.seen == [] and judge.seen == [("POST", "/v1/chat/completions", "Bearer sekret")]
    # the person names a proxy: then, and only then, the request goes through it
    monkeypatch.setenv("FINETUNE_JUDGE_PROXY", f"http://127.0.0.1:{proxy_port}")
    assert mod.rubric(prompts=["p"], completions=["<answer>42</answer>"]) == [1.0]
    assert len(proxy.seen) == 1 and proxy.seen[0][2] == "Bearer sekret" and len(judge.seen) == 1


def test_the_agent_cannot_set_the_persons_judge_settings_on_its_command_line(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_hook import decide, payload

    for variable in ("FINETUNE_JUDGE_HOSTS", "FINETUNE_JUDGE_KEY_ENVS", "FINETUNE_JUDGE_PROXY"):
        code, err = decide(payload("Bash", {"command": f"{variable}=x finetune rewards render runs/a/spec.yaml"},
                                   tmp_path))
        assert code == 2 and variable in err, err
    settings = Path(os.environ["XDG_CONFIG_HOME"]) / "llm-finetuning" / "settings.json"
    assert decide(payload("Write", {"file_path": str(settings), "content": "{}"}, tmp_path))[0] == 2
