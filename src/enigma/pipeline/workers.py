"""What every worker process of the pipeline's process pools runs first.

A pool's workers outlive their parent when it is killed outright (SIGKILL, or SIGTERM, which
Python does not turn into a clean shutdown): they are reparented and go on with the share of
agents they hold, for minutes, competing with a rerun for the cores. Nothing they would finish
is lost by stopping them, since every result file is written whole or not at all and a rerun
recomputes what is missing. So each worker watches its parent and exits when it is gone.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time

PARENT_POLL_S = 1.0


def init_worker() -> None:
    """Exit with the parent (watched from before torch's import, which takes seconds), and one
    torch thread per worker (the workers share the cores; more would oversubscribe them)."""
    exit_with_parent()
    import torch

    torch.set_num_threads(1)


def exit_with_parent(poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """Start a daemon thread that ends this process once its parent has gone. Polling the
    parent's id works on every POSIX system (Linux's PR_SET_PDEATHSIG would be exact but is
    Linux-only and fires on the death of the spawning *thread*, not the process). The parent is
    the one multiprocessing names, so a worker whose parent died while it was still starting
    (importing torch takes seconds) stops too, instead of watching init."""
    spawner = multiprocessing.parent_process()
    parent = spawner.pid if spawner is not None else os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                print(f"worker {os.getpid()}: parent {parent} is gone; stopping (finished results are saved)",
                      file=sys.stderr, flush=True)
                os._exit(1)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
