"""Agent fingerprints: a short digest that changes whenever the agent would answer
differently (spec, files, settings), so that cached samples are reused only for the same agent.

Large files (model weights) are identified by size and modification time rather than read in
full: hashing gigabytes on every run would cost more than the sampling it protects.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from enigma.dialogue import Turn

_HASH_LIMIT = 32 * 1024 * 1024  # bytes; above this a file is identified by size + mtime


def file_identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    if st.st_size <= _HASH_LIMIT:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return {"name": path.name, "sha256": h.hexdigest()}
    return {"name": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def tree_identity(root: Path, skip_dirs: Iterable[str] = ("__pycache__", ".git")) -> list[dict[str, Any]]:
    """Identity of every file under ``root`` (or of ``root`` itself when it is a file)."""
    root = Path(root)
    if root.is_file():
        return [file_identity(root)]
    skip = set(skip_dirs)
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not skip.intersection(p.relative_to(root).parts):
            ident = file_identity(p)
            ident["name"] = str(p.relative_to(root))
            out.append(ident)
    return out


def digest(parts: Any) -> str:
    """A stable 16-hex digest of JSON-able ``parts``."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def agent_fingerprint(spec: str, agent: Any) -> str:
    """Fingerprint of a loaded agent: its spec plus whatever it reports about itself through
    ``fingerprint_parts()`` (files, settings). Agents without that method are identified by
    spec alone, which is why the python kind adds its module's source."""
    parts: dict[str, Any] = {"spec": spec}
    fn = getattr(agent, "fingerprint_parts", None)
    if callable(fn):
        parts["agent"] = fn()
    return digest(parts)


def state_hash(history: Iterable[Turn]) -> str:
    """Digest of a dialogue state (the turns before the reply), independent of dialog id, so
    that identical states in different dialogues share their samples."""
    turns = [[t.role, t.text] for t in history]
    return hashlib.sha256(json.dumps(turns, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()[:24]
