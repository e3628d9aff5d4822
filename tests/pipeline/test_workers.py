"""The pipeline's process pools: a worker stops when its parent is killed outright, instead of
going on with its share of agents (found when a killed run left two workers training)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # an exited child nobody has reaped yet is gone


def _pool_parent(tmp_path: Path) -> subprocess.Popen:
    # The pool as enigma.pipeline.train builds it; each worker busy for a minute.
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from enigma.pipeline.workers import init_worker

        if __name__ == "__main__":
            with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
                futures = [pool.submit(time.sleep, 60) for _ in range(2)]
                print(" ".join(str(pid) for pid in pool._processes), flush=True)
                futures[0].result()
    """))
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("kill_after_s", [0.0, 6.0], ids=["while-starting", "while-working"])
def test_workers_exit_when_their_parent_is_killed(tmp_path, kill_after_s):
    parent = _pool_parent(tmp_path)
    workers = [int(p) for p in parent.stdout.readline().split()]
    try:
        assert len(workers) == 2
        time.sleep(kill_after_s)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(_alive, workers)), f"workers {workers} outlived their killed parent"
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
