"""Where ``enigma serve`` listens (issue 73, item 8): a port out of range, a host that does not
resolve or is not this machine's, a port in use are one ``error:`` line and exit code 2 (a port of
70000 was a traceback), found before the agent loads; listening beyond this machine without a key
says so, in one ``warning:`` line on stderr."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.agents.serving import free_port, serve_process

REPO = Path(__file__).resolve().parents[2]
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
ECHO = "python:enigma.agents.examples:echo"


def env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{REPO / 'src'}:{REPO}", **extra)


def serve_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "defaults.yaml").write_text("")
    return subprocess.run(ENIGMA + ["serve", ECHO, *args, "--params", str(tmp_path / "defaults.yaml")], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=60)


def one_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr and "Errno" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "0"])
def test_a_port_out_of_range_is_one_error_line(tmp_path, port):
    line = one_error(serve_cli(tmp_path, "--port", port))
    assert line == f"error: --port {port}: expected a port number from 1 to 65535"


def test_a_port_in_use_is_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error(serve_cli(tmp_path, "--port", str(port)))
    assert line.startswith(f"error: --host 127.0.0.1 --port {port}: cannot listen on 127.0.0.1 port {port} (")
    assert "in use" in line


@pytest.mark.parametrize("host, says", [("no-such-host.invalid", "not an address, and no such name"),
                                        ("192.0.2.1", "cannot listen on 192.0.2.1")])  # TEST-NET-1: not ours
def test_a_host_that_is_not_this_machine_is_one_error_line(tmp_path, host, says):
    line = one_error(serve_cli(tmp_path, "--host", host, "--port", str(free_port())))
    assert line.startswith(f"error: --host ") and says in line


def _served_warnings(tmp_path: Path, host: str, key: bool) -> list[str]:
    port = free_port()
    (tmp_path / "defaults.yaml").write_text("")
    argv = ENIGMA + ["serve", ECHO, "--host", host, "--port", str(port), "--params", str(tmp_path / "defaults.yaml")]
    extra = {}
    if key:
        argv += ["--api-key-env", "SERVE_KEY"]
        extra["SERVE_KEY"] = "sk-test-bind-0123456789"
    log = tmp_path / "server.log"
    with serve_process(argv, port, tmp_path, env(**extra), log) as base:
        assert httpx.get(f"{base}/health").status_code == 200
    return [line for line in log.read_text().splitlines() if "warning" in line.lower()]


def test_all_interfaces_without_a_key_warns_once(tmp_path):
    warnings = _served_warnings(tmp_path, "0.0.0.0", key=False)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("warning: --host 0.0.0.0 listens beyond this machine and no --api-key-env is set")


@pytest.mark.parametrize("host, key", [("0.0.0.0", True), ("127.0.0.1", False), ("localhost", False)])
def test_no_warning_with_a_key_or_on_loopback(tmp_path, host, key):
    assert _served_warnings(tmp_path, host, key) == []
