"""``enigma sample``: params, output, clear errors, and a run killed midway (SIGKILL of the
process) that a rerun completes without asking finished states again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from enigma.cli import app
from tests.agents import toy_agents as T

REPO = Path(__file__).resolve().parents[2]
ECHO = "python:tests.agents.toy_agents:echo"


def _params(tmp_path, **sample):
    body = {"n_samples": 2, "seed": 5, "cache_dir": str(tmp_path / "cache"), "chunk_states": 2, **sample}
    p = tmp_path / "params.yaml"
    p.write_text("sample:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in body.items()))
    return p


def test_sample_command(tmp_path):
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    params = _params(tmp_path)
    out = tmp_path / "targets.parquet"
    r = CliRunner().invoke(app, ["sample", str(store), ECHO, "--out", str(out), "--params", str(params), "-q",
                                 "--exclude-agent", "a2"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    table = pq.read_table(out)
    assert summary["rows"] == table.num_rows == 12 and summary["failed_samples"] == 0
    assert set(table["seed"].to_pylist()) == {5} and set(table["dialog_id"].to_pylist()) == {"d0", "d2"}
    r2 = CliRunner().invoke(app, ["sample", str(store), ECHO, "--out", str(out), "--params", str(params), "-q",
                                  "--exclude-agent", "a2"])
    assert json.loads(r2.stdout.strip().splitlines()[-1])["n_called"] == 0


def test_sample_command_errors(tmp_path):
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=2)
    params = _params(tmp_path)
    r = CliRunner().invoke(app, ["sample", str(store), "gpt:x", "--params", str(params)])
    assert r.exit_code == 2 and "unknown kind 'gpt'" in r.stderr
    r = CliRunner().invoke(app, ["sample", str(tmp_path / "nostore"), ECHO, "--params", str(params)])
    assert r.exit_code == 2 and "nostore: not a directory" in r.stderr
    r = CliRunner().invoke(app, ["sample", str(store), f"hf:{tmp_path / 'ckpt'}", "--params", str(params)])
    assert r.exit_code == 2 and "ckpt: not found" in r.stderr
    bad = _params(tmp_path, n_samples=0)
    r = CliRunner().invoke(app, ["sample", str(store), ECHO, "--params", str(bad)])
    assert r.exit_code == 2 and "section 'sample'" in r.stderr and "n_samples" in r.stderr
    down = _params(tmp_path, max_consecutive_errors=2)
    r = CliRunner().invoke(app, ["sample", str(store), "python:tests.agents.toy_agents:always_fails",
                                 "--params", str(down), "-q"])
    assert r.exit_code == 2 and "2 calls failed in a row" in r.stderr and "connection refused" in r.stderr


def test_killed_process_resumes(tmp_path):
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=10)
    params = _params(tmp_path, n_samples=1)
    log = tmp_path / "calls.txt"
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", ENIGMA_TEST_CALL_LOG=str(log), ENIGMA_TEST_DELAY="0.1")
    cmd = [sys.executable, "-c", "from enigma.cli import app; app()", "sample", str(store),
           "python:tests.agents.toy_agents:slow_counting", "--params", str(params), "-q",
           "--out", str(tmp_path / "out.parquet")]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (log.exists() and len(log.read_text().splitlines()) >= 9):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first_calls = len(log.read_text().splitlines())
    parts = list((tmp_path / "cache").rglob("part-*.parquet"))
    # one call per distinct state here (its occurrences' draws come in that call)
    cached = len({h for p in parts for h in pq.read_table(p).column("state_hash").to_pylist()})
    assert 0 < cached <= first_calls < 29  # killed midway; at most one chunk (2 calls) in flight lost
    assert first_calls - cached <= 2 + 1
    log.unlink()
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    second_calls = len(log.read_text().splitlines())
    assert summary["n_cached"] == cached and second_calls == summary["n_unique_states"] - cached
    assert pq.read_table(tmp_path / "out.parquet").column("error").null_count == 30


def _ingested_store(tmp_path: Path) -> Path:
    """Five dialogues of two agent turns each, ingested as a user would; d1's customer asks for
    an emoji."""
    records = []
    for i in range(5):
        ask = "send me an emoji" if i == 1 else f"d{i} asks"
        turns = [t for k in range(2) for t in ({"role": "user", "text": f"{ask} {k}"}, {"role": "agent", "text": f"d{i} answers {k}"})]
        records.append({"dialog_id": f"d{i}", "agent_id": "a1", "turns": turns, "ratings": {"score": i / 4}})
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["ingest", "jsonl", str(tmp_path / "logs.jsonl"), "--out", str(store), "--scale", "score=0:1"])
    assert r.exit_code == 0, r.output
    return store


def test_a_run_in_which_every_call_failed_is_an_unusable_agent(tmp_path):
    """A dead server and a store of 10 agent turns: too few calls to reach
    max_consecutive_errors (20), yet not one reply. `enigma sample` and `enigma estimate -t` both
    say so in one line and exit 2, and write no table of failures."""
    from tests.agents.serving import free_port

    store = _ingested_store(tmp_path)
    spec = f"openai:http://127.0.0.1:{free_port()}/v1#m"  # nothing listens on that port
    params = _params(tmp_path, n_samples=1, agents={"openai": {"max_retries": 0}})
    out = tmp_path / "targets.parquet"
    r = CliRunner().invoke(app, ["sample", str(store), spec, "--out", str(out), "--params", str(params), "-q"])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: agent {spec}: all 10 calls of this run failed") and r.stderr.count("\n") == 1
    assert "Connection refused" in r.stderr and not out.exists()
    r = CliRunner().invoke(app, ["estimate", "-e", str(store), "-t", f"t={spec}", "--encoder", "onehot", "-o",
                                 str(tmp_path / "out"), "--params", str(params), "-q"])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: agent {spec}: all 10 calls of this run failed") and r.stderr.count("\n") == 1
    assert not (tmp_path / "out" / "estimates.json").exists()


def test_a_reply_holding_a_lone_surrogate_is_an_error_row_and_the_run_goes_on(tmp_path):
    """Half an emoji cannot be written to Parquet: the sample fails, named in its row's error,
    and the other dialogues' replies are kept (a run where some calls succeed is no unusable agent)."""
    store = _ingested_store(tmp_path)
    out = tmp_path / "targets.parquet"
    r = CliRunner().invoke(app, ["sample", str(store), "python:tests.agents.toy_agents:half_emoji", "--out", str(out),
                                 "--params", str(_params(tmp_path, n_samples=1)), "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["failed_samples"] == 2
    rows = pq.read_table(out).to_pylist()
    failed = [row for row in rows if row["error"] is not None]
    assert [(row["dialog_id"], row["turn_index"]) for row in failed] == [("d1", 1), ("d1", 3)]
    assert all(row["text"] is None and row["error"].startswith("reply is not valid Unicode: lone surrogate \\ud83d")
               for row in failed)
    assert all(row["text"].startswith("re: d") for row in rows if row["error"] is None) and len(rows) == 10
