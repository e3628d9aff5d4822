"""``stream: true`` to ``enigma serve`` (issue 73, item 10): it used to get plain JSON, which an
OpenAI client asking for a stream cannot read. Now it gets server-sent events as the OpenAI API
sends them (``chat.completion.chunk`` objects, then ``data: [DONE]``), each reply whole in one
chunk since the agent answers whole replies. Read with a real streaming client (httpx) from a
real ``enigma serve``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from enigma.agents.examples import EchoAgent
from enigma.dialogue import Turn
from tests.agents.serving import free_port, serve_process

REPO = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"},
            {"role": "assistant", "content": "hi"}, {"role": "user", "content": "how are you?"}]
HISTORY = [Turn("user", "hello there"), Turn("agent", "hi"), Turn("user", "how are you?")]


def start(tmp: Path, factory: str):
    port = free_port()
    (tmp / "defaults.yaml").write_text("")
    argv = [sys.executable, "-c", "from enigma.cli import app; app()", "serve", f"python:tests.agents.toy_agents:{factory}",
            "--port", str(port), "--model-name", "streamer", "--params", str(tmp / "defaults.yaml")]
    return serve_process(argv, port, tmp, dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}"), tmp / "server.log")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    with start(tmp_path_factory.mktemp("stream"), "counting") as url:
        yield f"{url}/v1"


def read_stream(base: str, body: dict) -> tuple[httpx.Response, list[str]]:
    """The answer and the data of its events, read as they come."""
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{base}/chat/completions", json=body) as r:
        if r.status_code != 200:
            r.read()
            return r, []
        lines = list(r.iter_lines())
    assert all(line == "" or line.startswith("data: ") for line in lines), lines
    return r, [line[len("data: "):] for line in lines if line]


@pytest.mark.parametrize("n, seed", [(1, None), (3, 7)])
def test_stream_true_gets_server_sent_events(base, n, seed):
    body = {"model": "streamer", "messages": MESSAGES, "n": n, "stream": True, **({"seed": seed} if seed is not None else {})}
    r, events = read_stream(base, body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert {c["model"] for c in chunks} == {"streamer"}
    text, finish = {}, {}
    for c in chunks:
        for choice in c["choices"]:
            i = choice["index"]
            text[i] = text.get(i, "") + (choice["delta"].get("content") or "")
            if choice["finish_reason"] is not None:
                assert i not in finish and choice["delta"] == {}
                finish[i] = choice["finish_reason"]
            else:
                assert i not in finish  # nothing of a choice after its last chunk
                assert choice["delta"].get("role", "assistant") == "assistant"
    assert finish == {i: "stop" for i in range(n)}
    if seed is not None:  # the same replies the agent gives, and the same as without a stream
        assert [text[i] for i in range(n)] == EchoAgent().respond(HISTORY, n=n, seed=seed)
        plain = httpx.post(f"{base}/chat/completions", json={**body, "stream": False}).json()
        assert plain["object"] == "chat.completion"
        assert [c["message"]["content"] for c in plain["choices"]] == [text[i] for i in range(n)]
    else:
        assert text[0].startswith("re: how are you?")


@pytest.mark.parametrize("value", ['"yes"', "1", "null"])
def test_stream_must_be_a_boolean(base, value):
    body = '{"messages": [{"role": "user", "content": "hi"}], "stream": %s}' % value
    r = httpx.post(f"{base}/chat/completions", content=body.encode(), headers={"Content-Type": "application/json"})
    if value == "null":  # as if absent
        assert r.status_code == 200 and r.json()["object"] == "chat.completion"
        return
    assert r.status_code == 400
    assert r.json()["error"]["message"] == f"stream: expected true or false, got {value}"


def test_an_agent_failure_is_a_plain_json_error_before_any_event(tmp_path):
    """The agent answers before the first event, so its failure is still an HTTP error (as the
    OpenAI API answers a failed streaming request), never a stream cut off half-way."""
    with start(tmp_path, "misbehaving") as url:
        r, events = read_stream(f"{url}/v1", {"messages": [{"role": "user", "content": "RAISE"}], "stream": True})
    assert r.status_code == 500 and events == []
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["message"].startswith("the agent failed (error id ")
