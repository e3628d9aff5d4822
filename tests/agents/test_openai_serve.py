"""The openai kind against a real ``enigma serve`` subprocess on 127.0.0.1, and against small
misbehaving HTTP servers (down, slow, garbage, flaky); the API key never leaks."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from enigma.agents import AgentCallError, AgentSpecError, load_agent
from enigma.agents.config import AgentSettings, OpenAISettings
from enigma.dialogue import Turn
from enigma.sampling.sampler import SamplingAborted, run_sampling
from tests.agents import toy_agents as T
from tests.agents.serving import free_port, http_server, serve_process

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-7f3a9c1e5b2d4f60-secret"
HISTORY = [Turn("user", "hello there"), Turn("agent", "hi"), Turn("user", "how are you?")]


def settings(**kw) -> AgentSettings:
    base = dict(max_retries=1, backoff_s=0.0, timeout_s=5.0, connect_timeout_s=1.0, concurrency=2)
    base.update(kw)
    return AgentSettings(openai=OpenAISettings(**base))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``enigma serve`` of a counting agent, requiring KEY; yields (base_url, call_log, output_file)."""
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    call_log = tmp / "calls.txt"
    out = tmp / "server.log"
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", ENIGMA_TEST_CALL_LOG=str(call_log),
               SERVE_KEY=KEY)
    (tmp / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    argv = [sys.executable, "-c", "from enigma.cli import app; app()", "serve", "python:tests.agents.toy_agents:counting",
            "--port", str(port), "--model-name", "counting", "--api-key-env", "SERVE_KEY",
            "--params", str(tmp / "defaults.yaml")]
    with serve_process(argv, port, tmp, env, out) as base:
        yield f"{base}/v1", call_log, out


def test_models_and_completions(served, monkeypatch):
    base, _, _ = served
    headers = {"Authorization": f"Bearer {KEY}"}
    models = httpx.get(f"{base}/models", headers=headers).json()
    assert models["data"][0]["id"] == "counting"
    body = {"model": "counting", "messages": [{"role": "system", "content": "be nice"},
                                               {"role": "user", "content": "hello"}], "n": 3, "seed": 7}
    r = httpx.post(f"{base}/chat/completions", json=body, headers=headers).json()
    texts = [c["message"]["content"] for c in r["choices"]]
    assert len(texts) == 3 and all(t.startswith("re: hello [") for t in texts)
    bad = httpx.post(f"{base}/chat/completions", json={"messages": [{"role": "robot", "content": "x"}]}, headers=headers)
    assert bad.status_code == 400 and "messages[0].role" in bad.json()["error"]["message"]
    assert httpx.post(f"{base}/chat/completions", json=body).status_code == 401


@pytest.mark.parametrize("body", [b'{"messages": [', b"[1, 2]", b"\xff\xfe not JSON"])
def test_the_key_is_checked_before_the_body(served, body):
    """An unauthenticated request learns nothing about its body (it got FastAPI's 422 before);
    an authenticated bad body gets 400 naming what is wrong."""
    base, _, _ = served
    url, json_type = f"{base}/chat/completions", {"Content-Type": "application/json"}
    r = httpx.post(url, content=body, headers=json_type)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = httpx.post(url, content=body, headers={**json_type, "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert r.json()["error"]["message"].startswith("request body: ")


def test_client_against_served_agent(served, monkeypatch):
    base, _, _ = served
    monkeypatch.setenv("ENIGMA_OPENAI_API_KEY", KEY)
    agent = load_agent(f"openai:{base}#counting", settings())
    replies = agent.respond(HISTORY, n=2, seed=3)
    assert replies == T.EchoAgent().respond(HISTORY, n=2, seed=3)


def test_sampling_over_http_then_rerun_makes_no_calls(served, monkeypatch, tmp_path):
    base, call_log, _ = served
    monkeypatch.setenv("ENIGMA_OPENAI_API_KEY", KEY)
    store = T.tiny_store(n_dialogues=4)
    spec = f"openai:{base}#counting"
    before = len(call_log.read_text().splitlines()) if call_log.exists() else 0
    table, stats = run_sampling(store, spec, n_samples=2, cache_dir=tmp_path, settings=settings(), progress=False)
    assert table.column("error").null_count == table.num_rows == 24
    after = len(call_log.read_text().splitlines())
    assert after - before == stats.n_unique_states == stats.n_called
    _, again = run_sampling(store, spec, n_samples=2, cache_dir=tmp_path, settings=settings(), progress=False)
    assert again.n_called == 0 and len(call_log.read_text().splitlines()) == after


def test_api_key_never_appears(served, monkeypatch, tmp_path, caplog, capsys):
    base, _, server_log = served
    caplog.set_level(logging.DEBUG)
    # a wrong key: the server refuses, the error must not echo either key
    monkeypatch.setenv("ENIGMA_OPENAI_API_KEY", KEY + "-wrong")
    wrong = load_agent(f"openai:{base}#counting", settings())
    with pytest.raises(AgentCallError) as exc:
        wrong.respond(HISTORY)
    assert "401" in str(exc.value) and KEY not in str(exc.value)
    # a server that echoes the Authorization header back in an error: the message is scrubbed
    echo_srv, echo_url = http_server(lambda h: (500, h.headers.get("Authorization", "")))
    try:
        monkeypatch.setenv("ENIGMA_OPENAI_API_KEY", KEY)
        leaky = load_agent(f"openai:{echo_url}#x", settings(max_retries=0))
        with pytest.raises(AgentCallError) as exc2:
            leaky.respond(HISTORY)
        assert "***" in str(exc2.value) and KEY not in str(exc2.value)
        # sampling through it: the recorded errors and the cache hold no key
        store = T.tiny_store(n_dialogues=2)
        with pytest.raises(SamplingAborted) as exc3:
            run_sampling(store, f"openai:{echo_url}#x", cache_dir=tmp_path, settings=settings(max_retries=0),
                         max_consecutive_errors=2, progress=False)
        assert KEY not in str(exc3.value)
    finally:
        echo_srv.shutdown()
    ok = load_agent(f"openai:{base}#counting", settings())
    assert ok.respond(HISTORY)
    run_sampling(T.tiny_store(n_dialogues=2), f"openai:{base}#counting", cache_dir=tmp_path,
                 settings=settings(), progress=True)
    assert KEY not in repr(ok) and KEY not in str(ok.__dict__) and "<set>" in repr(ok)
    out = capsys.readouterr()
    assert KEY not in out.out and KEY not in out.err
    assert KEY not in caplog.text
    assert KEY not in server_log.read_text()
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


# ---- misbehaving servers ---------------------------------------------------------------------

def _ok(n=1, text="fine"):
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": text}} for i in range(n)]}


def test_server_down():
    agent = load_agent(f"openai:http://127.0.0.1:{free_port()}/v1#m", settings(max_retries=2))
    t0 = time.monotonic()
    with pytest.raises(AgentCallError, match=r"no answer after 3 attempt\(s\); last: cannot connect"):
        agent.respond(HISTORY)
    assert time.monotonic() - t0 < 10


def test_unusable_base_url_is_a_spec_error():
    # caught when the agent is built, not as an unexpected exception on every call
    with pytest.raises(AgentSpecError, match="not a valid URL"):
        load_agent(f"openai:http://127.0.0.1:{free_port()}/v1\x01#m", settings())


def test_slow_server_times_out():
    srv, url = http_server(lambda h: (time.sleep(1.5), (200, _ok()))[1])
    try:
        agent = load_agent(f"openai:{url}#m", settings(timeout_s=0.3, max_retries=0))
        with pytest.raises(AgentCallError, match="timed out after 0.3s"):
            agent.respond(HISTORY)
    finally:
        srv.shutdown()


@pytest.mark.parametrize(
    "body, match",
    [("<html>oops</html>", "not JSON"), ({"result": "x"}, "no 'choices' list"),
     ({"choices": [{"message": {"content": 5}}]}, "not a string")],
)
def test_garbage_answers(body, match):
    srv, url = http_server(lambda h: (200, body))
    try:
        with pytest.raises(AgentCallError, match=match):
            load_agent(f"openai:{url}#m", settings()).respond(HISTORY)
    finally:
        srv.shutdown()


def test_retries_after_transient_errors_and_fills_ignored_n():
    calls = []

    def answer(h):
        calls.append(1)
        return (503, "busy") if len(calls) == 1 else (200, _ok(1, f"r{len(calls)}"))

    srv, url = http_server(answer)
    try:
        # the first attempt fails with 503, then the server (like llama.cpp) answers one choice per request
        replies = load_agent(f"openai:{url}#m", settings(max_retries=2)).respond(HISTORY, n=3, seed=1)
    finally:
        srv.shutdown()
    assert replies == ["r2", "r3", "r4"] and len(calls) == 4


def test_an_empty_reply_is_recorded_as_said(tmp_path):
    import itertools

    calls = itertools.count()  # every other answer is empty: the model's answer, not a failure
    srv, url = http_server(lambda h: (200, _ok(1, "" if next(calls) % 2 == 0 else "fine")))
    try:
        table, _ = run_sampling(T.tiny_store(n_dialogues=1), f"openai:{url}#m", cache_dir=tmp_path,
                                settings=settings(), max_consecutive_errors=100, progress=False)
    finally:
        srv.shutdown()
    assert set(table["error"].to_pylist()) == {None} and set(table["text"].to_pylist()) == {"", "fine"}
