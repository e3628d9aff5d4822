"""Start a real ``enigma serve`` of an agent spec as a subprocess on 127.0.0.1, for tests that
need an OpenAI-compatible server (or one that is down: a free port with nothing on it)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A port nothing listens on (until someone binds it): calls to it are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def enigma_serve(spec: str, port: int, workdir: Path, *args: str, startup_s: float = 60) -> Iterator[str]:
    """Serve ``spec`` on ``port`` until the block ends; yields the base URL (``.../v1``). Its
    output goes to ``workdir/server.log``, quoted when it does not come up."""
    log = workdir / "server.log"
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from enigma.cli import app; app()", "serve", spec, "--port", str(port),
             "--params", str(workdir / "no-params.yaml"), *args],
            cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"enigma serve {spec} did not start: {log.read_text()}")
            time.sleep(0.2)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
