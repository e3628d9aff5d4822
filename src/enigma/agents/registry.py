"""The agents registry that the nightly job reads (the agents to evaluate, by name and spec),
and the record of agents already evaluated.

A registry is either
- a YAML file of named agent specs::

      agents:
        seller_a: python:enigma.sim.sellers:seller_a
        my_bot: http://127.0.0.1:8000/v1#model=my-bot

  (a list of ``{name: ..., spec: ...}`` mappings is accepted too), or
- a folder of checkpoints: each entry (sub-folder or file) is one agent named after it, its spec
  made from ``checkpoint_spec`` (``{path}`` is replaced by the entry's absolute path).

Each agent gets a fingerprint (its spec, plus sizes and times of a checkpoint's files), so that
an agent whose checkpoint is replaced under the same name counts as new. Credentials in a spec's
URL (``openai:http://user:password@host/v1#m``) are in neither the fingerprint nor anything
written: ``RegisteredAgent.shown`` is the spec reports, logs and the seen file hold.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from enigma.redaction import redact_userinfo

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class RegistryError(ValueError):
    """A registry or seen-state file is malformed; the message names the file and entry."""


@dataclass(frozen=True)
class RegisteredAgent:
    name: str
    spec: str  # as written: what loads the agent, credentials and all; never shown
    fingerprint: str

    @property
    def shown(self) -> str:
        """The spec as reports, logs and the seen file hold it: credentials in a URL hidden."""
        return redact_userinfo(self.spec)


def _fingerprint(spec: str, path: Path | None = None) -> str:
    # credentials do not change the agent, and a digest of a short password could be searched for
    h = hashlib.sha256(redact_userinfo(spec).encode())
    if path is not None:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            st = f.stat()
            h.update(f"{f.relative_to(path.parent)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise RegistryError(f"{where}: field 'name': {name!r} is not a valid agent name (letters, digits, _ . -)")
    return name


def read_registry(path: str | Path, checkpoint_spec: str = "hf:{path}") -> list[RegisteredAgent]:
    """All agents of a registry file or folder, sorted by name."""
    path = Path(path)
    if path.is_dir():
        return _read_folder(path, checkpoint_spec)
    if not path.is_file():
        raise RegistryError(f"{path}: agents registry not found (expected a YAML file or a folder of checkpoints)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML ({exc})") from exc
    if data is None:
        return []
    if not isinstance(data, dict) or "agents" not in data:
        raise RegistryError(f"{path}: expected a mapping with key 'agents'")
    entries = data["agents"] or {}
    pairs: list[tuple[Any, Any, str]] = []
    if isinstance(entries, dict):
        pairs = [(k, v, f"{path}: agents.{k}") for k, v in entries.items()]
    elif isinstance(entries, list):
        for i, e in enumerate(entries):
            where = f"{path}: agents[{i}]"
            if not isinstance(e, dict) or set(e) - {"name", "spec"} or "name" not in e or "spec" not in e:
                raise RegistryError(f"{where}: expected a mapping with exactly 'name' and 'spec'")
            pairs.append((e["name"], e["spec"], where))
    else:
        raise RegistryError(f"{path}: 'agents' must be a mapping of name to spec or a list")
    out: dict[str, RegisteredAgent] = {}
    for name, spec, where in pairs:
        name = _check_name(name, where)
        if not isinstance(spec, str) or not spec.strip():
            raise RegistryError(f"{where}: field 'spec': expected a non-empty string, got {spec!r}")
        if name in out:
            raise RegistryError(f"{where}: agent name {name!r} appears twice")
        out[name] = RegisteredAgent(name, spec.strip(), _fingerprint(spec.strip()))
    return sorted(out.values(), key=lambda a: a.name)


def _read_folder(path: Path, checkpoint_spec: str) -> list[RegisteredAgent]:
    if "{path}" not in checkpoint_spec:
        raise RegistryError(f"checkpoint_spec {checkpoint_spec!r} must contain '{{path}}'")
    out = []
    for entry in sorted(path.iterdir()):
        if entry.name.startswith("."):
            continue  # hidden files (e.g. .DS_Store, partial uploads) are not checkpoints
        name = entry.stem if entry.is_file() else entry.name
        _check_name(name, f"{path}: entry {entry.name}")
        spec = checkpoint_spec.replace("{path}", str(entry.resolve()))
        out.append(RegisteredAgent(name, spec, _fingerprint(spec, entry)))
    return out


class SeenAgents:
    """The agents already evaluated (name -> fingerprint and when), kept in a JSON file that
    is replaced atomically, so an interrupted nightly run never leaves it half-written."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except json.JSONDecodeError as exc:
                raise RegistryError(f"{self.path}: not valid JSON ({exc})") from exc
            if not isinstance(data, dict) or not isinstance(data.get("agents"), dict):
                raise RegistryError(f"{self.path}: expected {{'agents': {{name: {{fingerprint: ...}}}}}}")
            for name, e in data["agents"].items():
                if not isinstance(e, dict) or not isinstance(e.get("fingerprint"), str):
                    raise RegistryError(f"{self.path}: agents.{name}: field 'fingerprint' missing or not a string")
            self.entries = data["agents"]

    def is_new(self, agent: RegisteredAgent) -> bool:
        e = self.entries.get(agent.name)
        return e is None or e["fingerprint"] != agent.fingerprint

    def unseen(self, agents: list[RegisteredAgent]) -> list[RegisteredAgent]:
        return [a for a in agents if self.is_new(a)]

    def mark(self, agent: RegisteredAgent, **info: Any) -> None:
        self.entries[agent.name] = {
            "fingerprint": agent.fingerprint,
            "spec": agent.shown,
            "evaluated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **info,
        }

    def save(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"agents": self.entries}, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)
        return self.path
