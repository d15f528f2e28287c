"""No secret leaves without the person, refused before anything is written: `finetune rewards render` (agent
pre-approved) will not render a judge whose endpoint host the person did not allow (FINETUNE_JUDGE_HOSTS in their
own shell; this machine without it), so the agent cannot point a judge and any environment variable (as the
bearer key) at a host of its choosing. The rendered judge says which host it calls; at each call it re-checks
the host and never follows a redirect (tests/rewards/test_judge_hosts.py, with real listeners)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def judge_run(base_run, tmp_path, monkeypatch):
    """set(endpoint) -> spec path: the hostile suite's run with a judge reward (key from $HOME, as an agent
    could name any variable) at ``endpoint``."""
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    monkeypatch.delenv("FINETUNE_JUDGE_HOSTS", raising=False)

    def set_endpoint(endpoint: str, key: str = "HOME") -> Path:
        data = yaml.safe_load((run / "spec.yaml").read_text())
        data["rewards"] = data["rewards"][:2] + [{"name": "rubric", "type": "judge", "endpoint": endpoint,
                                                   "model": "m", "rubric": "10: right. 0: wrong.",
                                                   "api_key_env": key, "weight": 0.1}]
        (run / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return run / "spec.yaml"

    return set_endpoint


HOSTILE_ENDPOINTS = {  # endpoint: the host that must be refused
    "https://collector.example.net/v1": "collector.example.net",
    "http://127.0.0.1@collector.example.net/v1": "collector.example.net",  # userinfo that looks like loopback
    "http://localhost.collector.example.net:8000/v1": "localhost.collector.example.net",
    "http://[::ffff:10.0.0.1]/v1": "::ffff:10.0.0.1",
    "http://169.254.169.254/latest": "169.254.169.254",  # a cloud metadata service
}


@pytest.mark.parametrize("endpoint", list(HOSTILE_ENDPOINTS))
def test_render_refuses_a_judge_host_the_person_did_not_allow(judge_run, cli, endpoint):
    spec = judge_run(endpoint)
    before = {p.name: p.read_bytes() for p in spec.parent.iterdir() if p.is_file()}
    r = cli("rewards", "render", spec)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r
    assert HOSTILE_ENDPOINTS[endpoint] in r.err and "FINETUNE_JUDGE_HOSTS" in r.err and "rewards[2].endpoint" in r.err
    assert {p.name: p.read_bytes() for p in spec.parent.iterdir() if p.is_file()} == before


def test_an_allowlist_without_the_host_still_refuses(judge_run, cli, monkeypatch):
    monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", "judge.example.org, 127.0.0.1")
    r = cli("rewards", "render", judge_run("https://collector.example.net/v1"))
    assert r.code == 2 and "judge.example.org, 127.0.0.1" in r.err, r


@pytest.mark.parametrize("endpoint, allow", [("http://localhost:8000/v1", None),
                                             ("http://127.0.0.1:9/v1", None),
                                             ("https://Judge.Example.org:8443/v1", "judge.example.org")])
def test_an_allowed_host_renders_and_the_reward_says_which_host_it_calls(judge_run, cli, monkeypatch, endpoint,
                                                                         allow):
    if allow:
        monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", allow)
    monkeypatch.setenv("FINETUNE_JUDGE_KEY_ENVS", "JUDGE_API_KEY")  # the key name the person allowed
    spec = judge_run(endpoint, key="JUDGE_API_KEY")
    r = cli("rewards", "render", spec)
    assert r.code == 0, r
    host = endpoint.split("//")[1].split(":")[0].lower()
    assert f"Calls host {host} only" in (spec.parent / "rewards.py").read_text()
