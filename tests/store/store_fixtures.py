"""Helpers for the store tests: small JSONL inputs."""

from __future__ import annotations

import json
from pathlib import Path


def dialogue(dialog_id: str, agent_id: str = "bot-a", *, ratings=None, turns=None, **extra) -> dict:
    rec = {
        "dialog_id": dialog_id,
        "agent_id": agent_id,
        "turns": turns if turns is not None else [
            {"role": "user", "text": "hi there"},
            {"role": "agent", "text": "hello! how are you?"},
            {"role": "user", "text": "fine, thanks"},
            {"role": "agent", "text": "great to hear"},
        ],
        "ratings": {"overall": 3, "fun": 1} if ratings is None else ratings,
    }
    rec.update(extra)
    return rec


def write_jsonl(path: Path, records: list, raw_lines: dict[int, bytes] | None = None) -> Path:
    """Records as JSON lines; ``raw_lines`` replaces given 1-based lines with raw bytes."""
    lines = [json.dumps(r).encode() for r in records]
    for lineno, raw in (raw_lines or {}).items():
        lines[lineno - 1] = raw
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def nested(levels: int) -> list:
    """A JSON value of ``levels`` lists, one inside the other."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value
