"""``enigma serve`` holds up against a misbehaving agent and oversized requests (issue 16, item 7):
a body-size limit (413), a per-call timeout that keeps /health answering while calls hang (504),
malformed replies caught (500), and an agent's exception text kept to the server's log."""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.agents import toy_agents as T
from tests.agents.serving import free_port, serve_process

REPO = Path(__file__).resolve().parents[2]
MAX_BODY = 4096
TIMEOUT_S = 1.0
SLOTS = 4
HANG_S = 3.0


def ask(text: str, n: int = 1) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "n": n, "seed": 1}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``enigma serve`` of the misbehaving toy agent with small limits; yields (base URL, log)."""
    tmp = tmp_path_factory.mktemp("serve-limits")
    params = tmp / "params.yaml"
    params.write_text(json.dumps({"serve": {"max_body_bytes": MAX_BODY, "request_timeout_s": TIMEOUT_S,
                                            "max_concurrent_calls": SLOTS}}))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", ENIGMA_TEST_HANG_S=str(HANG_S))
    argv = [sys.executable, "-c", "from enigma.cli import app; app()", "serve", "python:tests.agents.toy_agents:misbehaving",
            "--port", str(port), "--params", str(params)]
    with serve_process(argv, port, tmp, env, tmp / "server.log") as base:
        yield base, tmp / "server.log"


def test_bodies_over_the_limit_get_413(server):
    base, _ = server
    url = f"{base}/v1/chat/completions"
    assert httpx.post(url, json=ask("x" * (MAX_BODY - 200))).status_code == 200
    big = json.dumps(ask("x" * 50_000)).encode()
    declared = httpx.post(url, content=big, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413 and "4096 bytes" in declared.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit must count the bytes as they come
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    chunked = httpx.post(url, content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413
    assert httpx.get(f"{base}/health").status_code == 200


def test_hung_calls_time_out_and_do_not_block_health(server):
    """45 calls to an agent that hangs (more than there are call slots): each gets 504 after the
    timeout, and /health keeps answering at once meanwhile."""
    base, log = server
    url = f"{base}/v1/chat/completions"
    with ThreadPoolExecutor(45) as pool, httpx.Client(timeout=30) as client:
        t0 = time.monotonic()
        hung = [pool.submit(client.post, url, json=ask(f"HANG {i}")) for i in range(45)]
        time.sleep(0.3)  # the calls are in
        health_s = []
        while not all(f.done() for f in hung):
            t = time.monotonic()
            assert client.get(f"{base}/health", timeout=5).status_code == 200
            health_s.append(time.monotonic() - t)
            time.sleep(0.05)
        answers = [f.result() for f in hung]
        elapsed = time.monotonic() - t0
    assert {r.status_code for r in answers} == {504}
    assert all(r.json()["error"]["type"] == "timeout" and "within 1s" in r.json()["error"]["message"] for r in answers)
    assert elapsed < TIMEOUT_S + 2.0, elapsed  # nobody waited for the hung calls to end
    assert len(health_s) >= 5 and max(health_s) < 0.5, health_s
    # the hung calls hold their slots until they return; then the server answers again
    deadline = time.monotonic() + HANG_S + 10
    while (r := httpx.post(url, json=ask("hello"), timeout=10)).status_code != 200:
        assert r.status_code == 504 and time.monotonic() < deadline
        time.sleep(0.2)
    assert r.json()["choices"][0]["message"]["content"].startswith("re: hello")
    assert "did not answer within 1s" in log.read_text()


@pytest.mark.parametrize("text", ["NONSTR", "SHORT", "NOTLIST", "SURROGATE"])
def test_malformed_replies_get_500_and_are_logged(server, text):
    base, log = server
    r = httpx.post(f"{base}/v1/chat/completions", json=ask(text, n=3))
    assert r.status_code == 500
    err = r.json()["error"]
    assert err["type"] == "server_error" and err["message"].startswith("the agent returned a malformed answer")
    assert err["id"] in err["message"]
    logged = [line for line in log.read_text().splitlines() if err["id"] in line]
    assert logged and "malformed" in logged[0]


def test_agent_exception_text_stays_in_the_server_log(server):
    base, log = server
    r = httpx.post(f"{base}/v1/chat/completions", json=ask("RAISE"))
    assert r.status_code == 500
    assert T.AGENT_SECRET not in r.text and "hunter2" not in r.text and "RuntimeError" not in r.text
    err = r.json()["error"]
    assert err["message"] == f"the agent failed (error id {err['id']}; the details are in the server's log)"
    text = log.read_text()
    at = text.index(f"error id {err['id']}: the agent failed")
    assert "Traceback" in text[at:] and T.AGENT_SECRET in text[at:]


@pytest.mark.parametrize("content", ['"hi \\ud83d"', '[{"type": "text", "text": "hi \\ud83d"}]'])
def test_a_lone_surrogate_in_a_request_gets_400(server, content):
    """JSON's "\\ud83d" (half an emoji) parses, but is not text: the request is refused before the
    agent sees it, instead of a bare 500 when the reply quoting it could not be encoded."""
    base, log = server
    body = '{"messages": [{"role": "user", "content": %s}]}' % content
    r = httpx.post(f"{base}/v1/chat/completions", content=body.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["message"].startswith("messages[0].content: not valid Unicode: lone surrogate \\ud83d")
    assert "UnicodeEncodeError" not in log.read_text()
