"""The openai kind honours ``Retry-After`` (issue 73, item 14): a 429 or 503 that asks for a wait
is retried after that wait, not after the backoff; a wait over
``sample.agents.openai.retry_after_max_s`` fails the call at once, naming it. Against real HTTP
servers on 127.0.0.1, the waits measured between the requests they receive."""

from __future__ import annotations

import email.utils
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from enigma.agents import AgentCallError, load_agent
from enigma.agents.config import AgentSettings, OpenAISettings
from enigma.dialogue import Turn
from tests.agents import toy_agents as T
from tests.agents.serving import http_server

HISTORY = [Turn("user", "hello there")]
OK = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}}]}


def agent(url: str, **kw):
    # no backoff at all: any wait measured is the one Retry-After asked for
    base = dict(max_retries=2, backoff_s=0.0, backoff_max_s=0.0, timeout_s=5.0, connect_timeout_s=1.0)
    return load_agent(f"openai:{url}#m", AgentSettings(openai=OpenAISettings(**{**base, **kw})))


def busy_then_ok(status: int, retry_after):
    """A server answering ``status`` with ``Retry-After: retry_after()`` first, then 200; it
    records when each request came in."""
    arrivals: list[float] = []

    def answer(h):
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            return status, {"error": {"message": "slow down"}}, {"Retry-After": retry_after()}
        return 200, OK

    srv, url = http_server(answer)
    return srv, url, arrivals


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_in_seconds_is_waited_for(status):
    srv, url, arrivals = busy_then_ok(status, lambda: "2")
    try:
        assert agent(url).respond(HISTORY) == ["fine"]
    finally:
        srv.shutdown()
    assert len(arrivals) == 2
    gap = arrivals[1] - arrivals[0]
    assert 2.0 <= gap < 3.5, gap  # the client asked again after the 2 s asked for, not at once


def test_retry_after_as_an_http_date_is_waited_for():
    # the date is to the second: 3 s ahead asks for a wait of 2 to 3 s
    srv, url, arrivals = busy_then_ok(503, lambda: email.utils.formatdate(time.time() + 3, usegmt=True))
    try:
        assert agent(url).respond(HISTORY) == ["fine"]
    finally:
        srv.shutdown()
    gap = arrivals[1] - arrivals[0]
    assert 1.9 <= gap < 4.0, gap


@pytest.mark.parametrize("wait, cap", [("86400", None), ("2", 1.0)])  # None: the default, 60 s
def test_a_wait_over_the_cap_fails_at_once_naming_it(wait, cap):
    arrivals: list[float] = []

    def answer(h):
        arrivals.append(time.monotonic())
        return 429, {"error": {"message": "quota exhausted"}}, {"Retry-After": wait}

    srv, url = http_server(answer)
    t0 = time.monotonic()
    try:
        with pytest.raises(AgentCallError) as exc:
            agent(url, **({} if cap is None else {"retry_after_max_s": cap})).respond(HISTORY)
    finally:
        srv.shutdown()
    assert time.monotonic() - t0 < 1.0
    assert len(arrivals) == 1  # not asked again before the server said to
    msg = str(exc.value)
    assert f"the server asks to wait {wait}s" in msg and "Retry-After" in msg
    assert f"retry_after_max_s = {60 if cap is None else cap:g}s" in msg


def test_a_garbled_retry_after_falls_back_to_the_backoff():
    srv, url, arrivals = busy_then_ok(429, lambda: "soon, maybe")
    try:
        assert agent(url).respond(HISTORY) == ["fine"]
    finally:
        srv.shutdown()
    assert arrivals[1] - arrivals[0] < 1.0


def test_enigma_sample_names_the_wait_and_the_setting(tmp_path):
    """Through the command: a server out of quota for a day stops ``enigma sample`` at once with
    one ``error:`` line that says why, the cap read from params.yaml."""
    srv, url = http_server(lambda h: (429, {"error": {"message": "daily quota"}}, {"Retry-After": "86400"}))
    repo = Path(__file__).resolve().parents[2]
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=2)
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"sample": {"max_consecutive_errors": 2, "agents": {"openai": {
        "max_retries": 3, "backoff_s": 0.0, "retry_after_max_s": 30}}}}))
    env = dict(os.environ, PYTHONPATH=f"{repo / 'src'}:{repo}")
    t0 = time.monotonic()
    try:
        res = subprocess.run([sys.executable, "-c", "from enigma.cli import app; app()", "sample", str(store),
                              f"openai:{url}#m", "--params", str(params), "--cache-dir", str(tmp_path / "cache"), "-q"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        srv.shutdown()
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert "86400s" in errors[0] and "retry_after_max_s = 30s" in errors[0], errors[0]
    assert time.monotonic() - t0 < 60
