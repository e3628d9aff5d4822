"""The OpenAI client's API key never leaks, whatever form it takes (issue 16, item 1): a key read
from a CRLF ``.env`` file, a key with whitespace inside, a server that echoes the Authorization
header back in an error body that the client cuts short. Every path is checked: the stdout and
stderr of ``enigma sample``, its logs, the sample cache and its output table, the server's log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from enigma.agents import AgentCallError, AgentSpecError, load_agent
from enigma.agents.apikey import MIN_FRAGMENT, Secret, read_api_key
from enigma.agents.config import AgentSettings, OpenAISettings
from enigma.cli import app
from enigma.dialogue import Turn
from tests.agents import toy_agents as T
from tests.agents.serving import free_port, http_server, serve_process

KEY = "sk-FAKE-0123456789abcdefghi"  # 27 characters, as in the issue
ENV = "ENIGMA_OPENAI_API_KEY"
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
HISTORY = [Turn("user", "hello there")]


def leaks(text: str | bytes, key: str = KEY) -> list[str]:
    """The pieces of ``key`` (MIN_FRAGMENT characters or more) found in ``text``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return [key[j : j + MIN_FRAGMENT] for j in range(len(key) - MIN_FRAGMENT + 1) if key[j : j + MIN_FRAGMENT] in text]


def leaks_in_files(root: Path) -> dict[str, list[str]]:
    found = {str(f): leaks(f.read_bytes()) for f in root.rglob("*") if f.is_file()}
    return {f: pieces for f, pieces in found.items() if pieces}


def write_params(path: Path, **openai) -> Path:
    settings = {"max_retries": 1, "backoff_s": 0.0, "timeout_s": 5.0, "connect_timeout_s": 1.0, **openai}
    path.write_text(json.dumps({"sample": {"max_consecutive_errors": 2, "agents": {"openai": settings}}}))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``enigma serve`` of the packaged echo agent requiring KEY; yields (base URL, server log)."""
    tmp = tmp_path_factory.mktemp("serve-key")
    port = free_port()
    env = dict(os.environ, SERVE_KEY=KEY)
    (tmp / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    argv = ENIGMA + ["serve", "python:enigma.agents.examples:echo", "--port", str(port), "--api-key-env", "SERVE_KEY",
                     "--params", str(tmp / "defaults.yaml")]
    with serve_process(argv, port, tmp, env, tmp / "server.log") as base:
        yield f"{base}/v1", tmp / "server.log"


def sample_cli(tmp_path: Path, spec: str, key: str) -> subprocess.CompletedProcess:
    """``enigma sample`` in a subprocess, as the issue ran it, with ``key`` in the environment."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=2)
    params = write_params(tmp_path / "params.yaml")
    env = dict(os.environ, **{ENV: key})
    return subprocess.run(ENIGMA + ["sample", str(store), spec, "--params", str(params), "--cache-dir",
                                    str(tmp_path / "cache"), "-q"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("ending", ["\r", "\r\n", " "])
def test_key_from_a_crlf_env_file_is_stripped_and_works(served, tmp_path, ending):
    base, server_log = served
    res = sample_cli(tmp_path, f"openai:{base}#m", KEY + ending)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["rows"] == 6 and summary["failed_samples"] == 0, summary
    assert not leaks(res.stdout) and not leaks(res.stderr)
    assert not leaks_in_files(tmp_path / "cache")
    assert not leaks(server_log.read_text())


@pytest.mark.parametrize("inner, shown", [("\r", "U+000D"), ("\n", "U+000A"), (" ", "U+0020"), ("\x1b", "U+001B"),
                                          ("\u00e9", "U+00E9")])
def test_key_with_inner_whitespace_or_control_is_a_clear_error(served, tmp_path, inner, shown):
    base, _ = served
    bad = KEY[:12] + inner + KEY[12:]
    res = sample_cli(tmp_path, f"openai:{base}#m", bad)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: $ENIGMA_OPENAI_API_KEY: the API key has") and shown in res.stderr
    assert "Traceback" not in res.stderr
    assert not leaks(res.stdout + res.stderr, bad) and not leaks(res.stdout + res.stderr)
    assert not list((tmp_path / "cache").rglob("*.parquet"))  # refused before any call


@pytest.mark.parametrize("status", [400, 503])  # refused at once / retried, then given up
def test_a_server_echoing_the_key_across_the_cut_leaks_nothing(tmp_path, monkeypatch, caplog, status):
    # The client keeps the first 200 characters of an error body: the padding puts the cut one
    # character before the end of the key, which used to leave 26 of its 27 characters.
    padding = "x" * (200 - len("Bearer ") - (len(KEY) - 1))
    srv, url = http_server(lambda h: (status, padding + h.headers.get("Authorization", "")))
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ENV, KEY)
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=2)
    params = write_params(tmp_path / "params.yaml")
    try:
        res = CliRunner().invoke(app, ["sample", str(store), f"openai:{url}#m", "--params", str(params),
                                       "--cache-dir", str(tmp_path / "cache"), "-q"])
    finally:
        srv.shutdown()
    assert res.exit_code == 2, res.output  # two failed states in a row: stopped
    assert not leaks(res.output) and not leaks(res.stderr) and not leaks(caplog.text)
    assert list((tmp_path / "cache").rglob("part-*.parquet")), "the failed states were not recorded"
    assert not leaks_in_files(tmp_path / "cache")
    assert f"HTTP {status}" in res.stderr and "Bearer ***" in res.stderr


def test_a_refused_header_is_labelled_and_not_retried(tmp_path):
    """Defence in depth behind read_api_key: were a bad header value ever sent, httpx refuses it
    and quotes it as bytes; that is neither 'cannot connect' nor worth asking again."""
    hits = []
    srv, url = http_server(lambda h: (hits.append(1), (200, {"choices": []}))[1])
    try:
        agent = load_agent(f"openai:{url}#m", AgentSettings(openai=OpenAISettings(max_retries=3, backoff_s=5.0)))
        agent._key = Secret(KEY + "\r")
        with pytest.raises(AgentCallError) as exc:
            agent.respond(HISTORY)
    finally:
        srv.shutdown()
    msg = str(exc.value)
    assert "request refused by the HTTP client, not sent (LocalProtocolError" in msg
    assert "cannot connect" not in msg and "attempt" not in msg and not hits
    assert "Bearer ***" in msg and not leaks(msg)


@pytest.mark.parametrize(
    "text",
    [KEY, repr(KEY), repr(f"Bearer {KEY}\r".encode()), json.dumps({"auth": f"Bearer {KEY}"}), f"{KEY[:-1]}",
     f"...{KEY[5:]}", KEY[:MIN_FRAGMENT]],
)
def test_scrub_finds_every_form_and_fragment(text):
    scrubbed = Secret(KEY).scrub(f"before {text} after")
    assert "***" in scrubbed and not leaks(scrubbed)
    assert scrubbed.startswith("before ") and scrubbed.endswith(" after")


def test_scrub_escaped_forms_of_a_key_with_quotes_and_backslashes():
    key = "sk-a\\b\"c'd-0123456789"
    secret = Secret(key)
    for text in (key, repr(key), repr(key.encode()), json.dumps(key), repr(f"Bearer {key}\r".encode())):
        assert "0123456789" not in secret.scrub(text) and "***" in secret.scrub(text), text
    # shorter runs are left alone (MIN_FRAGMENT - 1 characters is the most that can show)
    assert Secret(KEY).scrub(KEY[:MIN_FRAGMENT - 1]) == KEY[:MIN_FRAGMENT - 1]
    assert Secret("abc").scrub("xabcx") == "x***x"  # a key shorter than a fragment: whole


def test_read_api_key(monkeypatch):
    monkeypatch.setenv(ENV, f"  {KEY}\r\n")
    assert read_api_key(ENV).get() == KEY
    monkeypatch.setenv(ENV, " \r\n")
    assert read_api_key(ENV).get() is None and repr(read_api_key(ENV)) == "<unset>"
    monkeypatch.delenv(ENV)
    assert read_api_key(ENV).get() is None
    monkeypatch.setenv(ENV, KEY[:5] + "\t" + KEY[5:])
    with pytest.raises(AgentSpecError, match=r"\$ENIGMA_OPENAI_API_KEY: .*whitespace \(U\+0009\)") as exc:
        read_api_key(ENV)
    assert not leaks(str(exc.value))


def test_serve_strips_its_own_key_too(tmp_path):
    """``enigma serve --api-key-env`` reads its key the same way: a CRLF copy still matches the
    client's clean key."""
    port = free_port()
    env = dict(os.environ, SERVE_KEY=KEY + "\r\n")
    (tmp_path / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    argv = ENIGMA + ["serve", "python:enigma.agents.examples:echo", "--port", str(port), "--api-key-env", "SERVE_KEY",
                     "--params", str(tmp_path / "defaults.yaml")]
    with serve_process(argv, port, tmp_path, env, tmp_path / "server.log") as base:
        ok = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
