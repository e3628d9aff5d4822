"""A web page in the user's browser cannot drive a local ``enigma serve`` (issue 73, item 13).

Without a key the server took a ``text/plain`` body (which a page may POST anywhere, no preflight)
and any ``Host`` header (a DNS-rebinding page sends its own name), so a page could call the agent.
Now a POST body must be ``application/json`` (415, the agent not called), the Host header must
name the server (400), and no CORS header is sent, so a cross-origin preflight fails. Against
real ``enigma serve`` processes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.agents.serving import free_port, serve_process

REPO = Path(__file__).resolve().parents[2]
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()


def start(tmp: Path, host: str = "127.0.0.1", serve: dict | None = None):
    port = free_port()
    params = tmp / "params.yaml"
    params.write_text(json.dumps({"serve": serve or {}}))
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", ENIGMA_TEST_CALL_LOG=str(tmp / "calls.txt"))
    argv = ENIGMA + ["serve", "python:tests.agents.toy_agents:counting", "--host", host, "--port", str(port),
                     "--params", str(params)]
    return serve_process(argv, port, tmp, env, tmp / "server.log"), port


def calls(tmp: Path) -> int:
    f = tmp / "calls.txt"
    return len(f.read_text().splitlines()) if f.exists() else 0


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """``enigma serve`` on 127.0.0.1 without a key; yields (base URL, port, its folder)."""
    tmp = tmp_path_factory.mktemp("serve-browser")
    server, port = start(tmp)
    with server as base:
        yield base, port, tmp


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_post_that_is_not_json_gets_415_and_the_agent_is_not_called(local, content_type):
    base, _, tmp = local
    before = calls(tmp)
    headers = {"Content-Type": content_type} if content_type else {}
    r = httpx.post(f"{base}/v1/chat/completions", content=BODY, headers=headers)
    assert r.status_code == 415, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"].startswith("Content-Type: expected application/json")
    assert calls(tmp) == before


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"])
def test_a_json_post_is_answered(local, content_type):
    base, _, tmp = local
    before = calls(tmp)
    r = httpx.post(f"{base}/v1/chat/completions", content=BODY, headers={"Content-Type": content_type})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("re: hello")
    assert calls(tmp) == before + 1


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/models", "/health"])
@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "localhost", "127.0.0.1:{other}", "localhost.:{port}"])
def test_a_host_header_that_does_not_name_the_server_gets_400(local, route, host):
    """A DNS-rebinding page (evil.example resolving to 127.0.0.1) sends its own name as Host."""
    base, port, tmp = local
    before = calls(tmp)
    host = host.format(port=port, other=port + 1 if port < 65535 else port - 1)
    headers = {"Host": host, "Content-Type": "application/json"}
    r = httpx.request("POST" if "chat" in route else "GET", f"{base}{route}", content=BODY if "chat" in route else None,
                      headers=headers)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert message.startswith(f"Host header {host!r}: this server answers only to ")
    assert f"localhost:{port}" in message and "serve.allowed_hosts" in message
    assert calls(tmp) == before


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
def test_the_loopback_names_with_the_port_are_answered(local, name):
    base, port, _ = local
    r = httpx.post(f"{base}/v1/chat/completions", content=BODY,
                   headers={"Host": f"{name}:{port}", "Content-Type": "application/json"})
    assert r.status_code == 200, r.text


def test_no_cors_headers_so_a_cross_origin_page_cannot_read_or_preflight(local):
    base, _, tmp = local
    before = calls(tmp)
    preflight = httpx.options(f"{base}/v1/chat/completions", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert not 200 <= preflight.status_code < 300, preflight.status_code
    assert not [h for h in preflight.headers if h.lower().startswith("access-control-")], preflight.headers
    for r in (httpx.post(f"{base}/v1/chat/completions", json=json.loads(BODY), headers={"Origin": "http://evil.example"}),
              httpx.get(f"{base}/v1/models", headers={"Origin": "http://evil.example"})):
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers
    assert calls(tmp) == before + 1  # the POST above (no browser would have sent it: the preflight failed)


def test_bound_to_every_interface_any_host_unless_allowed_hosts_says(tmp_path):
    """0.0.0.0 without the setting: any Host (its names are unknown here); with it: only those
    (name: any port; name:port) and the loopback names."""
    (tmp_path / "open").mkdir()
    server, port = start(tmp_path / "open", host="0.0.0.0")
    with server as base:
        r = httpx.get(f"{base}/v1/models", headers={"Host": "my-box.lan:8000"})
        assert r.status_code == 200, r.text
    (tmp_path / "listed").mkdir()
    server, port = start(tmp_path / "listed", host="0.0.0.0", serve={"allowed_hosts": ["my-box.lan", "proxy.lan:443"]})
    with server as base:
        answered = {h: httpx.get(f"{base}/v1/models", headers={"Host": h}).status_code
                    for h in ["my-box.lan", "my-box.lan:8000", "proxy.lan:443", f"localhost:{port}",
                              "proxy.lan", "proxy.lan:8000", "evil.example", f"evil.example:{port}"]}
    assert answered == {"my-box.lan": 200, "my-box.lan:8000": 200, "proxy.lan:443": 200, f"localhost:{port}": 200,
                        "proxy.lan": 400, "proxy.lan:8000": 400, "evil.example": 400, f"evil.example:{port}": 400}


@pytest.mark.parametrize("bad", ["", "http://my-box.lan", "a b", "user@host"])
def test_a_malformed_allowed_host_is_one_error_line(tmp_path, bad):
    import subprocess

    (tmp_path / "params.yaml").write_text(json.dumps({"serve": {"allowed_hosts": [bad]}}))
    res = subprocess.run(ENIGMA + ["serve", "python:enigma.agents.examples:echo", "--port", str(free_port()),
                                   "--params", str(tmp_path / "params.yaml")], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}"), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("error: ") and "section 'serve'" in res.stderr and "allowed_hosts" in res.stderr
