"""The agents that ship with the package (issue 16, item 8): the README's ``enigma serve``
command line works as written from any directory, with no PYTHONPATH; the stochastic example
samples its declared distribution through ``enigma sample``."""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from collections import Counter
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from typer.testing import CliRunner

from enigma.agents.examples import DISTRIBUTION, StochasticAgent
from enigma.cli import app
from enigma.dialogue import Turn
from tests.agents import toy_agents as T
from tests.agents.serving import free_port, serve_process

REPO = Path(__file__).resolve().parents[2]
ENIGMA = Path(sys.executable).parent / "enigma"  # the console script a user runs


def readme_serve_commands() -> list[list[str]]:
    """Every ``enigma serve python:...`` command line of the README, as a shell would split it."""
    text = (REPO / "README.md").read_text()
    return [shlex.split(line, comments=True) for line in re.findall(r"^enigma serve python:.*$", text, re.M)]


def test_readme_serve_example_runs_as_written(tmp_path):
    commands = readme_serve_commands()
    assert commands, "the README has no `enigma serve python:...` example"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for argv in commands:
        assert "--port" in argv, argv
        port = free_port()  # the README's port may be taken here; everything else is as written
        argv = [str(ENIGMA)] + argv[1:]
        argv[argv.index("--port") + 1] = str(port)
        with serve_process(argv, port, tmp_path, env, tmp_path / "server.log") as base:
            r = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200, r.text
            assert isinstance(r.json()["choices"][0]["message"]["content"], str)


def test_stochastic_example_samples_its_declared_distribution(tmp_path):
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)  # 12 agent turns
    out = tmp_path / "targets.parquet"
    (tmp_path / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    res = CliRunner().invoke(app, ["sample", str(store), "python:enigma.agents.examples:stochastic", "-n", "100",
                                   "--cache-dir", str(tmp_path / "cache"), "--params", str(tmp_path / "defaults.yaml"),
                                   "-q", "-o", str(out)])
    assert res.exit_code == 0, res.output
    texts = pq.read_table(out).column("text").to_pylist()
    counts, n = Counter(texts), len(texts)
    assert n == 1200 and set(counts) <= set(DISTRIBUTION)
    for reply, p in DISTRIBUTION.items():  # within 4 standard errors of the declared probability
        assert abs(counts[reply] / n - p) < 4 * math.sqrt(p * (1 - p) / n), (reply, counts[reply] / n, p)


def test_stochastic_example_is_seeded():
    agent, history = StochasticAgent(), [Turn("user", "hello")]
    assert agent.respond(history, n=20, seed=3) == agent.respond(history, n=20, seed=3)
    assert agent.respond(history, n=20, seed=3) != agent.respond(history, n=20, seed=4)
