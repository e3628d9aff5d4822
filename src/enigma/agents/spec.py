"""Parsing agent spec strings.

A spec names an agent in one string, usable on the command line and in params.yaml:

- ``python:<module>:<factory>``          a factory called with no arguments
- ``hf:<dir>``                           a local causal LM (a model dir, or a dir with one .gguf)
- ``openai:<base-url>#<model>``          an OpenAI-compatible chat-completions server
- ``transcripts:<store dir>[?agent=<id>]``  retrieval stand-in from the agent's own transcripts
- ``transcripts-onsupport:<store dir>?store=<experience dir>[&agent=<id>]``  the same, snapped
  to the nearest logged reply of an experience store
- ``table:<parquet file>``               precomputed replies keyed by dialog_id and turn_index

An openai base URL may carry credentials (``http://user:password@host/v1``): they go to the
server and nowhere else. Every message here shows the spec with them replaced by ``***``
(``enigma.redaction``), and so do ``AgentSpec``'s ``str``, ``repr`` and ``shown``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from enigma import python_spec
from enigma.agents.errors import AgentSpecError
from enigma.redaction import redact_userinfo

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

    @property
    def shown(self) -> str:
        """The spec as any message, log, report or cache shows it: credentials in a URL hidden."""
        return redact_userinfo(self.raw)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return (f"AgentSpec(kind={self.kind!r}, target={redact_userinfo(self.target)!r}, model={self.model!r}, "
                f"options={self.options!r}, raw={self.shown!r})")


def shown_spec(spec: str) -> str:
    """A spec string as messages, logs, reports and caches show it: credentials in a URL hidden."""
    return redact_userinfo(spec) if isinstance(spec, str) else spec


def parse_spec(spec: str) -> AgentSpec:
    """The parts of a spec string; ``AgentSpecError`` naming the spec (its credentials hidden)
    and what is wrong with it."""
    try:
        return _parse(spec)
    except AgentSpecError as exc:
        raise AgentSpecError(shown_spec(str(exc))) from None


def _parse(spec: str) -> AgentSpec:
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
