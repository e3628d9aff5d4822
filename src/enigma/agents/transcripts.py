"""Retrieval stand-ins for agents that cannot be run, built only from their own transcripts.

APPROXIMATION: these agents do not run the real model. ``TranscriptAgent`` answers a state
with a reply the agent once gave after the most similar context (the last ``context_turns``
turns, compared by sentence embeddings from ``enigma.encoders.text_cache``). Results obtained
with them are labelled as approximations (``enigma.agents.approximation_label``).

Transcripts come as a canonical store directory, restricted to one agent with ``?agent=<id>``
when it holds several. Two kinds are meant:

- self-play (e.g. the See 2019 store written by ``enigma.store.readers.see2019_selfplay``): both
  sides are the agent, so with ``both_sides`` every turn after the first is one of its replies;
- the agent's own conversations with people, a *rated* store: only its ``agent`` turns are its
  replies (the other side is a person, whatever ``both_sides`` says). Its ratings are never read:
  only the dialogue ids, agent ids and turns are loaded, so a stand-in built from a held-out
  agent's own chats knows what it said and nothing of how it was rated (information regime (c)).

Openings: a state with no context (the agent speaks first) is answered with one of the agent's
own logged openings (turn 0 of its transcripts), drawn uniformly with the call's seed, so the
openings keep the agent's own opening distribution.

Sources: with ``sources`` set, a stand-in also says where each reply came from
(``respond_with_sources``): the turns of its own transcript before the reply it retrieved. A
retrieved reply names the people, places and numbers of the conversation it was said in, and
follows its speaker's earlier turns there; read against the logged conversation whose state
retrieved it, every such name looks unsaid and its previous turn is another agent's (the
grounding, knowledge and target-history readings of ``enigma.encoders.frozen``), so the sampler
keeps the source beside the reply. The on-support variant's source is the same: the stand-in's
own chat where it said the reply it snapped from. The logged chat of the snapped words is another
agent's, and read there a reply's previous turn and repetition describe that agent
(measured: ``studies/docs/estimator-history.md``, whose earlier turns a target reply follows).

Ties: several contexts are often identical ("hi how are you"); samples are drawn uniformly
among all contexts at least as similar as the k-th nearest, so ties do not favour whichever
transcript came first.

``OnSupportTranscriptAgent`` answers with the logged reply of an experience store that is
nearest to what the direct variant would say: its actions stay inside the support of the logs,
where the density ratio DICE estimates is defined (direct replies of the self-play stand-in were
found separable from logged replies with AUC up to 0.99). The stand-in's own agent's dialogues
in that store are left out of the replies it snaps to: held out, they are not part of the logs
the estimate is made from, and snapping to them would make the own-chats stand-in its own
logged replies again.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from enigma.agents.config import TranscriptSettings
from enigma.agents.errors import AgentSpecError
from enigma.agents.fingerprint import tree_identity
from enigma.dialogue import History, Turn

_TIE_EPS = 1e-6


# The only columns a stand-in reads: what was said, and by which agent. Never a rating.
_DIALOGUE_COLUMNS = ["dialog_id", "agent_id"]


def _open_store(path: str | Path, what: str):
    """The store's dialogues (ids and agents only) and turns, and whether it is rated (read off
    the schema's column names, not from any rating value)."""
    import pyarrow.parquet as pq

    from enigma.store import schema as S
    from enigma.store.experience import ExperienceStore, StoreError

    try:
        store = ExperienceStore.open(path, dialogue_columns=_DIALOGUE_COLUMNS)
    except StoreError as exc:
        raise AgentSpecError(f"{what}: {exc}") from exc
    return store, bool(S.rating_names(pq.read_schema(Path(path) / S.DIALOGUES_FILE)))


def _store_files(path: Path) -> list[dict[str, Any]]:
    from enigma.store import schema as S

    return [f for f in tree_identity(path) if f["name"] in (S.DIALOGUES_FILE, S.TURNS_FILE)]


def context_text(turns: Sequence[Turn], k: int) -> str:
    return "\n".join(t.text for t in turns[-k:])


SOURCE_FORMAT = "json [role, text] turns"


def source_text(turns: Sequence[Turn]) -> str:
    """A reply's own conversation before it, as the target table's ``source_context`` holds it: a
    JSON list of ``[role, text]`` ("[]" for an opening)."""
    return json.dumps([[turn.role, turn.text] for turn in turns], ensure_ascii=False)


def _make_embedder(settings: TranscriptSettings):
    from enigma.encoders.text_cache import EmbeddingCache

    return EmbeddingCache(model=settings.encoder, cache_dir=settings.embed_cache_dir, progress=False)


class TranscriptAgent:
    """Nearest-context retrieval over one agent's own transcripts (an approximation)."""

    approximation = True

    def __init__(
        self,
        path: str | Path,
        settings: TranscriptSettings | None = None,
        agent_id: str | None = None,
        embedder: Any = None,
    ):
        self.path = Path(path)
        self.settings = settings or TranscriptSettings()
        store, rated = _open_store(self.path, f"transcripts {self.path}")
        agents = store.agents()
        if agent_id is None:
            if len(agents) != 1:
                raise AgentSpecError(
                    f"transcripts {self.path}: the store holds {len(agents)} agents; choose one with "
                    f"'?agent=<id>' (e.g. {agents[:3]})"
                )
            agent_id = agents[0]
        elif agent_id not in agents:
            raise AgentSpecError(f"transcripts {self.path}: agent {agent_id!r} not in the store (agents: {agents})")
        self.agent_id = agent_id
        store = store.filter_agents(keep={agent_id})

        # a rated store holds conversations with people: the other side's turns are theirs
        self.both_sides = self.settings.both_sides and not rated
        k = self.settings.context_turns
        contexts, replies, sources, openings = [], [], [], []
        for turns in store.histories().values():
            for t, turn in enumerate(turns):
                if not (self.both_sides or turn.role == "agent") or not turn.text.strip():
                    continue
                if t == 0:
                    openings.append(turn.text)
                else:
                    contexts.append(context_text(turns[:t], k))
                    replies.append(turn.text)
                    if self.settings.sources:
                        sources.append(source_text(turns[:t]))
        if not replies:
            raise AgentSpecError(f"transcripts {self.path}: agent {agent_id!r} has no replies to retrieve from")
        self.replies = replies
        self.sources = sources  # parallel to replies when ``sources`` is set, else empty
        self.openings = openings
        self.embedder = embedder if embedder is not None else _make_embedder(self.settings)
        self.context_vectors = np.asarray(self.embedder.embed(contexts), dtype=np.float32)

    def _draw(self, sims: np.ndarray, k: int, n: int, rng: random.Random) -> list[int]:
        k = min(k, sims.shape[0])
        kth = np.partition(sims, -k)[-k]
        candidates = np.flatnonzero(sims >= kth - _TIE_EPS).tolist()
        return [rng.choice(candidates) for _ in range(n)]

    def prepare(self, histories: Sequence[History]) -> None:
        """Embed the contexts of many states in one batched pass (kept in the on-disk cache),
        so that the per-state calls that follow are lookups."""
        k = self.settings.context_turns
        texts = sorted({context_text(list(h), k) for h in histories if h})
        if texts:
            self.embedder.embed(texts)

    @property
    def records_sources(self) -> bool:
        return self.settings.sources

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        return [reply for reply, _ in self.retrieve(history, n, seed)]

    def respond_with_sources(self, history: History, n: int = 1, seed: int | None = None) -> list[tuple[str, str]]:
        """The same replies as ``respond`` (same seed, same draws), each with the turns of its own
        transcript before it (``source_text``)."""
        if not self.settings.sources:
            raise AgentSpecError(f"transcripts {self.path}: sources were not recorded (set transcripts.sources)")
        return self.retrieve(history, n, seed)

    def retrieve(self, history: History, n: int, seed: int | None) -> list[tuple[str, str | None]]:
        """``n`` replies drawn with ``seed``, each with its source (None while ``sources`` is off)."""
        rng = random.Random(seed)
        source = (lambda i: self.sources[i]) if self.settings.sources else (lambda i: None)
        if not history:
            if not self.openings:
                # the agent never opened a transcript: fall back to its replies to the shortest contexts
                picks = [rng.choice(range(len(self.replies))) for _ in range(n)]
                return [(self.replies[i], source(i)) for i in picks]
            return [(rng.choice(self.openings), source_text(()) if self.settings.sources else None) for _ in range(n)]
        q = np.asarray(self.embedder.embed([context_text(list(history), self.settings.context_turns)]), dtype=np.float32)[0]
        sims = self.context_vectors @ q
        return [(self.replies[i], source(i)) for i in self._draw(sims, self.settings.top_k, n, rng)]

    def fingerprint_parts(self) -> dict[str, Any]:
        # ``sources`` joins the settings only when set: without it the replies and the agent's
        # fingerprint are what they were before the setting existed
        exclude = {"embed_cache_dir"} | (set() if self.settings.sources else {"sources"})
        from enigma.encoders.text_cache import VECTORS

        parts = {
            "transcripts": _store_files(self.path),
            "agent_id": self.agent_id,
            "settings": self.settings.model_dump(exclude=exclude),
            # the retrieval reads the cache's sentence vectors: replies drawn with another recipe's
            # vectors (a near tie may fall the other way) are not reused from the sample cache
            "vectors": VECTORS,
        }
        if self.settings.sources:
            parts["source_format"] = SOURCE_FORMAT  # cached sources of another format are not reused
        return parts

    def __repr__(self) -> str:
        sides = "both sides" if self.both_sides else "its own turns"
        return (f"TranscriptAgent({str(self.path)!r}, agent={self.agent_id!r}, {len(self.replies)} replies from "
                f"{sides}; approximation)")


class OnSupportTranscriptAgent:
    """The transcript stand-in snapped to the nearest logged reply of an experience store."""

    approximation = True

    def __init__(
        self,
        path: str | Path,
        store_path: str | Path,
        settings: TranscriptSettings | None = None,
        agent_id: str | None = None,
        embedder: Any = None,
    ):
        self.settings = settings or TranscriptSettings()
        embedder = embedder if embedder is not None else _make_embedder(self.settings)
        self.direct = TranscriptAgent(path, self.settings, agent_id=agent_id, embedder=embedder)
        self.embedder = embedder
        self.store_path = Path(store_path)
        store, _ = _open_store(self.store_path, f"on-support store {self.store_path}")
        others = store.without_agent(self.direct.agent_id)
        turns = others.turns
        texts = [
            text
            for role, text in zip(turns.column("role").to_pylist(), turns.column("text").to_pylist())
            if role == "agent" and text.strip()
        ]
        self.logged = sorted(set(texts))
        if not self.logged:
            raise AgentSpecError(f"on-support store {self.store_path}: no agent replies to snap to "
                                 f"(besides {self.direct.agent_id!r}'s own)")
        self.logged_vectors = np.asarray(embedder.embed(self.logged), dtype=np.float32)
        self._snaps: dict[str, list[int]] = {}

    def prepare(self, histories: Sequence[History]) -> None:
        self.direct.prepare(histories)
        # every direct answer is one of these texts: embedding them now makes snapping a lookup
        self.embedder.embed(sorted(set(self.direct.replies) | set(self.direct.openings)))

    def _nearest_logged(self, text: str) -> list[int]:
        """The logged replies nearest to a direct answer (all of them when tied). A direct
        answer is one of the agent's few thousand transcript turns, asked about again and
        again, so each is compared with the logged replies once."""
        got = self._snaps.get(text)
        if got is None:
            sims = self.logged_vectors @ np.asarray(self.embedder.embed([text]), dtype=np.float32)[0]
            got = self._snaps[text] = np.flatnonzero(sims >= sims.max() - _TIE_EPS).tolist()
        return got

    @property
    def records_sources(self) -> bool:
        return self.settings.sources

    def _snap(self, direct: list[tuple[str, str | None]], seed: int | None) -> list[tuple[str, str | None]]:
        rng = random.Random(seed)
        return [(self.logged[rng.choice(self._nearest_logged(text))], source) for text, source in direct]

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        return [reply for reply, _ in self._snap(self.direct.retrieve(history, n, seed), seed)]

    def respond_with_sources(self, history: History, n: int = 1, seed: int | None = None) -> list[tuple[str, str]]:
        """``respond``'s replies (same seed, same draws), each with the stand-in's own chat before
        the reply it snapped from: where the stand-in's agent said what the snapped words stand for."""
        if not self.settings.sources:
            raise AgentSpecError(f"on-support {self.store_path}: sources were not recorded (set transcripts.sources)")
        return self._snap(self.direct.retrieve(history, n, seed), seed)

    def fingerprint_parts(self) -> dict[str, Any]:
        parts = {"direct": self.direct.fingerprint_parts(), "store": _store_files(self.store_path),
                 "snaps_to": "the store's agent replies but the stand-in agent's own"}
        if self.settings.sources:
            # until 2026-11-28 a snapped reply's source was the logged chat of its words: samples
            # cached with those sources are not reused
            parts["snapped_source"] = "the stand-in's own chat"
        return parts

    def __repr__(self) -> str:
        return (
            f"OnSupportTranscriptAgent({str(self.direct.path)!r}, agent={self.direct.agent_id!r}, "
            f"store={str(self.store_path)!r}, {len(self.logged)} logged replies; approximation)"
        )
