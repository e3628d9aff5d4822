"""Target agents: one interface (``enigma.contracts.Agent``), named by spec strings.

``load_agent(spec)`` builds any of the kinds listed in ``enigma.agents.spec``;
``fingerprint(spec, agent)`` identifies it for the sampling cache. Heavy libraries
(transformers, httpx, the text encoder) load only for the kinds that need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from enigma.agents.config import APPROXIMATION_LABEL, AgentSettings, is_retrieval_stand_in, unsourced_stand_in
from enigma.agents.errors import AgentCallError, AgentSpecError
from enigma.agents.fingerprint import agent_fingerprint, digest, state_hash
from enigma.agents.spec import KINDS, AgentSpec, parse_spec, shown_spec
from enigma.contracts import Agent

__all__ = [
    "AgentCallError",
    "AgentSettings",
    "AgentSpec",
    "AgentSpecError",
    "KINDS",
    "fingerprint",
    "is_retrieval_stand_in",
    "unsourced_stand_in",
    "unsourced_stand_in_table",
    "load_agent",
    "parse_spec",
    "shown_spec",
    "state_hash",
]


def unsourced_stand_in_table(path: str | Path) -> str | None:
    """The spec of the retrieval stand-in that sampled the replies of ``path`` (a target table
    written by ``enigma sample``, whose metadata names its agent), where the table does not say
    where they were said (no ``source_context`` column); None for any other table, one that
    names no agent (made by hand), or a file that cannot be read (its reader says why)."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception:  # pyarrow raises several types; the reader of the file reports it
        return None
    spec = (schema.metadata or {}).get(b"enigma.sampling.spec", b"").decode("utf-8", "replace")
    return spec if is_retrieval_stand_in(spec) and "source_context" not in schema.names else None


def load_agent(spec: str, settings: AgentSettings | None = None, *, isolate: bool = False) -> Agent:
    """Build the agent a spec names. Raises ``AgentSpecError`` (a ``ValueError``) with the
    spec and the missing piece when it cannot. ``isolate``: a ``python:`` agent runs in a worker
    process of its own (where ``settings.python.isolate``, the default), an
    ``enigma.agents.isolated.IsolatedPythonAgent`` that its caller closes."""
    s = parse_spec(spec)
    settings = settings or AgentSettings()
    if s.kind == "python":
        from enigma.agents.python_agent import load_python_agent

        if isolate and settings.python.isolate:
            from enigma.agents.isolated import IsolatedPythonAgent

            return IsolatedPythonAgent(s, settings.python)

        return load_python_agent(s)
    if s.kind == "table":
        from enigma.agents.table import TableAgent

        return TableAgent(s.target)
    if s.kind == "hf":
        from enigma.agents.hf import HFAgent

        return HFAgent(s.target, settings.hf)
    if s.kind == "openai":
        from enigma.agents.openai_client import OpenAIAgent

        return OpenAIAgent(s.target, s.model or "", settings.openai)
    if s.kind == "transcripts":
        from enigma.agents.transcripts import TranscriptAgent

        return TranscriptAgent(s.target, settings.transcripts, agent_id=s.options.get("agent"))
    if s.kind == "transcripts-onsupport":
        from enigma.agents.transcripts import OnSupportTranscriptAgent

        return OnSupportTranscriptAgent(
            s.target, s.options["store"], settings.transcripts, agent_id=s.options.get("agent")
        )
    raise AgentSpecError(f"agent spec {spec!r}: kind {s.kind!r} has no loader")  # pragma: no cover


def fingerprint(spec: str, agent: Any) -> str:
    """A 16-hex digest that changes when the agent's spec, files or settings change. Credentials
    in a base URL do not go into it (``AgentSpec.shown``), as an API key does not: they do not
    change the agent's replies, and a digest of a short password could be searched for."""
    s = parse_spec(spec)
    if s.kind == "python":
        from enigma.agents.python_agent import python_fingerprint_parts

        from enigma.agents.isolated import IsolatedPythonAgent

        # an agent in its own process: the parts its worker read off the real agent
        parts = agent.python_parts if isinstance(agent, IsolatedPythonAgent) else python_fingerprint_parts(s, agent)
        return digest({"spec": s.shown, "python": parts})
    return agent_fingerprint(s.shown, agent)


def approximation_label(spec: str) -> str | None:
    return APPROXIMATION_LABEL.get(parse_spec(spec).kind)
