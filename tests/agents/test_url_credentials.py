"""Credentials never shown or stored (issue 73, item 9).

An ``openai:`` spec whose base URL carries a user and password (``http://alice:PW@host/v1``) printed
the password in its error and stored it in the sample cache's ``agent.json``, the cache parts and
the output table's metadata; a key pasted into params.yaml (``sample.agents.openai.api_key: sk-...``)
was echoed by the validation error (pydantic's ``input_value=``). Now the URL's user information
is ``***`` in every message, file and name, the fingerprint does not depend on it, the server
still gets it (as Basic auth), and a params error quotes no value that may be a secret. Through
``enigma sample`` and ``enigma serve`` in subprocesses, against real HTTP servers."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.agents import toy_agents as T
from tests.agents.serving import free_port, http_server, serve_process

REPO = Path(__file__).resolve().parents[2]
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
USER, PASSWORD = "alice", "hunter2-Pa55word"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, BASIC, f"{USER}:{PASSWORD}")
OK = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}}]}


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{REPO / 'src'}:{REPO}")


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@", 1)


def leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [s for s in SECRETS if s in text]


def files_with_leaks(root: Path) -> dict[str, list[str]]:
    found = {str(f): leaks(f.read_bytes()) for f in root.rglob("*") if f.is_file()}
    return {f: s for f, s in found.items() if s}


def sample(tmp: Path, spec: str, *extra: str) -> subprocess.CompletedProcess:
    store = T.write_tiny_store(tmp / "store", n_dialogues=2)
    params = tmp / "params.yaml"
    params.write_text(json.dumps({"sample": {"max_consecutive_errors": 2, "agents": {"openai": {
        "max_retries": 0, "timeout_s": 5, "connect_timeout_s": 1}}}}))
    return subprocess.run(ENIGMA + ["sample", str(store), spec, "--params", str(params), "--cache-dir", str(tmp / "cache"),
                                    "-q", *extra], cwd=tmp, env=env(), capture_output=True, text=True, timeout=120)


def test_a_server_that_is_down_the_error_hides_the_password(tmp_path):
    spec = f"openai:{with_credentials(f'http://127.0.0.1:{free_port()}/v1')}#m"
    res = sample(tmp_path, spec)
    assert res.returncode == 2, res.stderr
    assert not leaks(res.stderr + res.stdout), res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: agent openai:http://***@127.0.0.1:"), res.stderr
    assert "cannot connect" in lines[0]
    assert not files_with_leaks(tmp_path)


def test_a_sample_stores_no_credentials_and_the_server_still_gets_them(tmp_path):
    seen = []

    def answer(h):
        seen.append(h.headers.get("Authorization"))
        return 200, OK

    srv, url = http_server(answer)
    try:
        res = sample(tmp_path, f"openai:{with_credentials(url)}#m", "--out", str(tmp_path / "targets.parquet"))
    finally:
        srv.shutdown()
    assert res.returncode == 0, res.stderr
    assert seen and set(seen) == {f"Basic {BASIC}"}  # the credentials still reach the server
    assert not leaks(res.stdout + res.stderr)
    assert not files_with_leaks(tmp_path), files_with_leaks(tmp_path)
    info = json.loads(next((tmp_path / "cache").rglob("agent.json")).read_text())
    assert info["spec"] == f"openai:{url.replace('http://', 'http://***@')}#m"
    import pyarrow.parquet as pq

    meta = pq.read_schema(tmp_path / "targets.parquet").metadata
    assert meta[b"enigma.sampling.spec"].decode() == info["spec"]


def test_a_server_that_echoes_the_basic_token_is_scrubbed(tmp_path):
    srv, url = http_server(lambda h: (500, {"error": f"bad auth: {h.headers.get('Authorization')} for {h.path}"}))
    try:
        res = sample(tmp_path, f"openai:{with_credentials(url)}#m")
    finally:
        srv.shutdown()
    assert res.returncode == 2 and "HTTP 500" in res.stderr and "***" in res.stderr, res.stderr
    assert not leaks(res.stderr + res.stdout), res.stderr
    assert not files_with_leaks(tmp_path)


def test_the_fingerprint_does_not_depend_on_the_credentials():
    from enigma.agents import fingerprint, load_agent

    specs = [f"openai:http://{u}@127.0.0.1:9/v1#m" for u in (f"{USER}:{PASSWORD}", f"{USER}:other-password", "***")]
    prints = {fingerprint(s, load_agent(s)) for s in specs}
    assert len(prints) == 1  # nothing of the password in it, so nothing to search a password for
    plain = "openai:http://127.0.0.1:9/v1#m"
    assert fingerprint(plain, load_agent(plain)) not in prints  # a URL with credentials is another URL


@pytest.mark.parametrize("spec", [
    f"openai:http://{USER}:{PASSWORD}@127.0.0.1:9/v1",  # no '#<model>'
    f"openai:ftp://{USER}:{PASSWORD}@127.0.0.1:9/v1#m",  # not http
    f"opneai:http://{USER}:{PASSWORD}@127.0.0.1:9/v1#m",  # a typo in the kind
    f"openai:http://{USER}:{PASSWORD}@127.0.0.1:9/v1\x01#m",  # not a valid URL
])
def test_a_malformed_spec_is_named_without_its_password(tmp_path, spec):
    res = sample(tmp_path, spec)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("error: ") and "***@127.0.0.1" in res.stderr, res.stderr
    assert not leaks(res.stderr), res.stderr


def test_enigma_serve_of_such_an_agent_names_it_without_the_password(tmp_path):
    """``enigma serve openai:http://alice:PW@.../v1#m`` (a proxy of another server): /v1/models
    names the model after the spec, which held the password."""
    inner_port, outer_port = free_port(), free_port()
    (tmp_path / "defaults.yaml").write_text("")
    inner = ENIGMA + ["serve", "python:enigma.agents.examples:echo", "--port", str(inner_port), "--model-name", "echo",
                      "--params", str(tmp_path / "defaults.yaml")]
    spec = f"openai:{with_credentials(f'http://127.0.0.1:{inner_port}/v1')}#echo"
    outer = ENIGMA + ["serve", spec, "--port", str(outer_port), "--params", str(tmp_path / "defaults.yaml")]
    with serve_process(inner, inner_port, tmp_path, env(), tmp_path / "inner.log"), \
            serve_process(outer, outer_port, tmp_path, env(), tmp_path / "outer.log") as base:
        models = httpx.get(f"{base}/v1/models")
        reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert models.json()["data"][0]["id"] == f"openai:http://***@127.0.0.1:{inner_port}/v1#echo"
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"].startswith("re: hi")
    assert not leaks(models.text + reply.text)
    assert not leaks((tmp_path / "outer.log").read_text())


KEY = "sk-FAKE-0123456789abcdefghi"


@pytest.mark.parametrize("params, where, secret", [
    ({"sample": {"agents": {"openai": {"api_key": KEY}}}}, "sample.agents.openai.api_key", KEY),  # only api_key_env exists
    ({"sample": {"agents": {"openai": {"api_key_env": KEY, "token": KEY}}}}, "sample.agents.openai.token", KEY),
    ({"openai_api_key": KEY}, "openai_api_key", KEY),  # an unknown section
    # an entry with fields missing: pydantic quoted the whole entry (cut in the middle when long)
    ({"benchmarks": {"b": {"agent_spec": "openai:http://u:Pw-9xQ@h#m"}}}, "benchmarks.b", "Pw-9xQ"),
])
def test_a_params_error_quotes_no_secret(tmp_path, params, where, secret):
    (tmp_path / "params.yaml").write_text(json.dumps(params))
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=1)
    res = subprocess.run(ENIGMA + ["sample", str(store), "python:enigma.agents.examples:echo", "--params",
                                   str(tmp_path / "params.yaml")], cwd=tmp_path, env=env(), capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr and where in res.stderr, res.stderr
    assert secret not in res.stderr and secret[:12] not in res.stderr, res.stderr


def test_a_params_error_still_quotes_a_plain_value(tmp_path):
    (tmp_path / "params.yaml").write_text(json.dumps({"sample": {"n_samples": -3}}))
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=1)
    res = subprocess.run(ENIGMA + ["sample", str(store), "python:enigma.agents.examples:echo", "--params",
                                   str(tmp_path / "params.yaml")], cwd=tmp_path, env=env(), capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "sample.n_samples" in res.stderr and "input_value=-3" in res.stderr, res.stderr


def test_the_nightly_registry_keeps_credentials_out_of_its_seen_file_and_fingerprints(tmp_path):
    from enigma.agents.registry import SeenAgents, read_registry

    prints = []
    for password in (PASSWORD, "another-password"):
        registry = tmp_path / f"agents-{len(prints)}.yaml"
        registry.write_text(f"agents:\n  my_bot: openai:http://{USER}:{password}@10.0.0.5:8000/v1#my-bot\n")
        (agent,) = read_registry(registry)
        assert agent.spec.startswith(f"openai:http://{USER}:{password}@")  # what loads the agent
        assert agent.shown == "openai:http://***@10.0.0.5:8000/v1#my-bot"
        prints.append(agent.fingerprint)
        seen = SeenAgents(tmp_path / "seen.json")
        seen.mark(agent, estimates={"reward": 0.5})
        seen.save()
    assert prints[0] == prints[1]
    assert not files_with_leaks(tmp_path / "seen.json") and "another-password" not in (tmp_path / "seen.json").read_text()
    assert json.loads((tmp_path / "seen.json").read_text())["agents"]["my_bot"]["spec"] == agent.shown
