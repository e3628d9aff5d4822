"""Parsing agent spec strings.

A spec names an agent in one string, usable on the command line and in params.yaml:

- ``python:<module>:<factory>``          a factory called with no arguments
- ``hf:<dir>``                           a local causal LM (a model dir, or a dir with one .gguf)
- ``openai:<base-url>#<model>``          an OpenAI-compatible chat-completions server
- ``transcripts:<store dir>[?agent=<id>]``  retrieval stand-in from the agent's own transcripts
- ``transcripts-onsupport:<store dir>?store=<experience dir>[&agent=<id>]``  the same, snapped
  to the nearest logged reply of an experience store
- ``table:<parquet file>``               precomputed replies keyed by dialog_id and turn_index
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from enigma import python_spec
from enigma.agents.errors import AgentSpecError

KINDS = ("python", "hf", "openai", "transcripts", "transcripts-onsupport", "table")

# Which query options each kind understands; anything else is a typo worth reporting.
_OPTIONS = {"transcripts": {"agent"}, "transcripts-onsupport": {"agent", "store"}}


@dataclass(frozen=True)
class AgentSpec:
    kind: str
    target: str  # module:factory, a path, or a base URL
    model: str | None = None  # openai only
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def __str__(self) -> str:
        return self.raw


def parse_spec(spec: str) -> AgentSpec:
    if not isinstance(spec, str) or not spec.strip():
        raise AgentSpecError(f"agent spec {spec!r}: empty; expected '<kind>:<target>' with kind one of {', '.join(KINDS)}")
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in KINDS:
        raise AgentSpecError(f"agent spec {spec!r}: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not rest:
        raise AgentSpecError(f"agent spec {spec!r}: nothing after '{kind}:'")

    if kind == "python":
        try:
            module, factory = python_spec.parse(spec, f"agent spec {spec!r}")
        except python_spec.PluginSpecError as exc:
            raise AgentSpecError(str(exc)) from None
        return AgentSpec(kind, f"{module}:{factory}", raw=spec)

    if kind == "openai":
        base, sep, model = rest.partition("#")
        if not sep or not model:
            raise AgentSpecError(f"agent spec {spec!r}: expected 'openai:<base-url>#<model>'")
        if not base.startswith(("http://", "https://")):
            raise AgentSpecError(f"agent spec {spec!r}: base URL {base!r} must start with http:// or https://")
        return AgentSpec(kind, base.rstrip("/"), model=model, raw=spec)

    options: dict[str, str] = {}
    if kind in _OPTIONS and "?" in rest:
        rest, _, query = rest.rpartition("?")
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key not in _OPTIONS[kind]:
                raise AgentSpecError(
                    f"agent spec {spec!r}: unknown option {key!r}; {kind} understands {sorted(_OPTIONS[kind])}"
                )
            if not value:
                raise AgentSpecError(f"agent spec {spec!r}: option {key!r} is empty")
            options[key] = value
    if kind == "transcripts-onsupport" and "store" not in options:
        raise AgentSpecError(
            f"agent spec {spec!r}: the on-support variant needs the experience store to snap to: "
            "'transcripts-onsupport:<transcripts dir>?store=<experience dir>'"
        )
    if not rest:
        raise AgentSpecError(f"agent spec {spec!r}: missing path")
    return AgentSpec(kind, rest, options=options, raw=spec)
