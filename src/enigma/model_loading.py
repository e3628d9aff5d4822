"""One lock around every lazy model load in the package.

``transformers`` builds its top-level names on first access (``_LazyModule.__getattr__``), and
that is not thread-safe: in a process that has not imported it yet, two threads that run
``from transformers import AutoModel`` at once can see ``ImportError: cannot import name
'AutoModel' from 'transformers'``. ``from_pretrained`` imports the architecture's module lazily
in the same way. The nightly flow's Prefect task threads each load a sentence encoder, and its
first run on a fresh clone lost an agent to this (issue 73, item 15; with eight threads from a
cold process, seven of eight loads failed before this lock).

So every function that imports ``transformers`` inside it and loads a model does both under
``MODEL_LOAD_LOCK``. It is re-entrant (a load may call another one) and held only while a model
is imported and loaded, never while one runs, so loads are serialised and nothing else is.
This module imports nothing: any layer may use it.
"""

from __future__ import annotations

import threading

MODEL_LOAD_LOCK = threading.RLock()
