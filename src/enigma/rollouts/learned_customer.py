"""A retrieval customer learned from the experience data, and rollouts of an agent with it.

The ENIGMA paper's self-play baseline on the airline task lets the agent talk with a customer
model learned from the logged dialogues. The simulator's own customer (``enigma.sim.customer``)
is the ground truth of that benchmark, so an estimator that used it would be on-policy
evaluation with the true user; this customer knows only what the logs show.

Each episode replays one logged customer (a logged dialogue: its persona and goal are in what
its user side said):

- it opens with that dialogue's first user utterance;
- after each agent reply it answers with the user utterance that followed the agent turn of
  the same logged dialogue most similar to the reply (so a customer asked for a name gives the
  name it gave in its log, whichever turn the agent asks it in);
- it stops when the reply looks like an ending: the nearest logged agent turns of the whole
  experience (``end_neighbours`` of them, majority) ended their dialogues. What an ending
  looks like is thus learned from the logged final agent turns, not from the simulator's tags.

Similarity is the cosine of cached MiniLM sentence vectors (``embedding``) or the Jaccard
overlap of word sets (``words``); ``studies/rollouts_customer.py`` measures which works
better. Episodes run in lockstep so each turn's replies are embedded in one batch. Everything
is seeded: the same store, agent and config give the same dialogues.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import pyarrow as pa

from enigma.contracts import Agent
from enigma.dialogue import Turn
from enigma.rollouts.config import LearnedCustomerConfig
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

SOURCE = "learned-customer"


class RolloutError(ValueError):
    """Bad input to the learned customer or its rollouts; the message names it."""


# ---- similarity ------------------------------------------------------------------------------
class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_WORD = re.compile(r"[a-z0-9]+")
_BUCKETS = 1 << 20  # hashed word ids: collisions are negligible at this vocabulary size


def _word_matrix(texts: Sequence[str]):
    from scipy import sparse

    rows, cols = [], []
    for i, t in enumerate(texts):
        ids = {zlib.crc32(w.encode()) % _BUCKETS for w in _WORD.findall(t.lower())}
        rows.extend([i] * len(ids))
        cols.extend(ids)
    data = np.ones(len(rows), dtype=np.float32)
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(texts), _BUCKETS))


class WordOverlap:
    """Jaccard overlap of lower-cased word sets (numbers count as words: flight numbers and
    dates are what the airline turns differ by)."""

    def encode(self, texts: Sequence[str]):
        return _word_matrix(texts)

    def similarity(self, queries, pool) -> np.ndarray:
        inter = np.asarray((queries @ pool.T).todense(), dtype=np.float64)
        qn = np.asarray(queries.sum(axis=1), dtype=np.float64).reshape(-1, 1)
        pn = np.asarray(pool.sum(axis=1), dtype=np.float64).reshape(1, -1)
        union = qn + pn - inter
        return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


class EmbeddingSimilarity:
    """Cosine of sentence vectors (the cache's vectors are L2-normalised; normalised again
    here so any embedder works)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(texts):
            raise RolloutError(f"embedder returned shape {v.shape} for {len(texts)} texts")
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    def similarity(self, queries: np.ndarray, pool: np.ndarray) -> np.ndarray:
        return queries @ pool.T


def make_similarity(config: LearnedCustomerConfig, embedder: Embedder | None = None):
    if config.similarity == "words":
        return WordOverlap()
    if embedder is None:
        from enigma.encoders.text_cache import EmbeddingCache

        embedder = EmbeddingCache(config.embedding_model, config.cache_dir, progress=False)
    return EmbeddingSimilarity(embedder)


# ---- the customer ----------------------------------------------------------------------------
@dataclass(frozen=True)
class LoggedCustomer:
    """One logged dialogue's customer: what it said first, and what it said after each agent
    turn that it answered (``pool_rows`` index those agent turns in the customer's pool)."""

    dialog_id: str
    agent_id: str
    opening: str
    pool_rows: tuple[int, ...]
    answers: tuple[str, ...]


@dataclass
class Episode:
    index: int
    customer: LoggedCustomer
    ended: str | None = None  # final | max_turns


class LearnedCustomer:
    """Customers replayed from ``experience`` (minus ``exclude_agents``' dialogues: under
    leave-one-agent-out the held-out agent's own logged customers are never replayed)."""

    def __init__(
        self,
        experience: ExperienceStore,
        config: LearnedCustomerConfig | None = None,
        *,
        embedder: Embedder | None = None,
        exclude_agents: Sequence[str] = (),
    ):
        self.config = config or LearnedCustomerConfig()
        store = experience.filter_agents(drop=set(exclude_agents)) if exclude_agents else experience
        self.excluded = tuple(sorted(exclude_agents))
        by_dialog: dict[str, list[tuple[int, str, str]]] = {}
        t = store.turns
        for did, idx, role, text in zip(
            t.column("dialog_id").to_pylist(), t.column("turn_index").to_pylist(),
            t.column("role").to_pylist(), t.column("text").to_pylist(),
        ):
            by_dialog.setdefault(did, []).append((idx, role, text))
        agent_of = dict(zip(store.dialogues.column("dialog_id").to_pylist(), store.dialogues.column("agent_id").to_pylist()))

        pool_texts: list[str] = []
        pool_final: list[bool] = []
        customers: list[LoggedCustomer] = []
        most_agent_turns = 0
        for did in sorted(by_dialog):
            turns = [(role, text) for _, role, text in sorted(by_dialog[did])]
            agent_rows = [i for i, (role, _) in enumerate(turns) if role == "agent"]
            if not agent_rows:
                continue
            most_agent_turns = max(most_agent_turns, len(agent_rows))
            rows, answers = [], []
            for i in agent_rows:
                pool_texts.append(turns[i][1])
                # an agent turn that closes its dialogue is what an ending looks like
                pool_final.append(i == len(turns) - 1)
                if i + 1 < len(turns) and turns[i + 1][0] == "user":
                    rows.append(len(pool_texts) - 1)
                    answers.append(turns[i + 1][1])
            # A customer that opens the dialogue and answered at least one agent turn: one
            # that never answered shows nothing of how it would reply, so it is not replayed
            # (its agent turns still teach the end detector).
            if turns[0][0] == "user" and rows:
                customers.append(LoggedCustomer(did, agent_of.get(did, ""), turns[0][1], tuple(rows), tuple(answers)))
        if not customers:
            raise RolloutError(
                "learned customer: no logged dialogue opens with a user turn and has a user answer to an agent turn"
                + (f" (agents excluded: {', '.join(self.excluded)})" if self.excluded else "")
            )
        if not any(pool_final):
            raise RolloutError("learned customer: no logged dialogue ends on an agent turn, so no ending can be learned")
        self.customers = customers
        self.pool_texts = pool_texts
        self.pool_final = np.array(pool_final, dtype=bool)
        self.max_agent_turns = self.config.max_agent_turns or most_agent_turns
        self.similarity = make_similarity(self.config, embedder)
        self._pool = self.similarity.encode(pool_texts)

    def episodes(self, n: int, seed: int | None = None) -> list[Episode]:
        """``n`` episodes, each a logged customer drawn without replacement while there are
        enough (then with replacement), seeded."""
        if n < 1:
            raise RolloutError(f"learned customer: episodes must be >= 1, got {n}")
        rng = np.random.default_rng(self.config.seed if seed is None else seed)
        picks = rng.choice(len(self.customers), size=n, replace=n > len(self.customers))
        return [Episode(i, self.customers[int(j)]) for i, j in enumerate(picks)]

    def is_final(self, replies: Sequence[str], encoded=None) -> np.ndarray:
        """Whether each reply ends the dialogue: the majority of its ``end_neighbours``
        nearest logged agent turns closed their dialogues (ties: not final)."""
        q = self.similarity.encode(list(replies)) if encoded is None else encoded
        sim = self.similarity.similarity(q, self._pool)
        k = min(self.config.end_neighbours, sim.shape[1])
        # stable sort: among equally similar logged turns the earlier one wins, deterministically
        nearest = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        return self.pool_final[nearest].sum(axis=1) * 2 > k

    def react(self, episodes: Sequence[Episode], replies: Sequence[str]) -> list[str | None]:
        """The customer's answer to each episode's latest agent reply, or None where the
        reply ends the dialogue (the episode's ``ended`` is set)."""
        if len(episodes) != len(replies):
            raise RolloutError(f"learned customer: {len(episodes)} episodes but {len(replies)} replies")
        if not replies:
            return []
        q = self.similarity.encode(list(replies))
        final = self.is_final(replies, q)
        out: list[str | None] = []
        for j, (ep, reply) in enumerate(zip(episodes, replies)):
            if final[j]:
                ep.ended = "final"
                out.append(None)
                continue
            rows = list(ep.customer.pool_rows)
            sim = self.similarity.similarity(q[j : j + 1], self._pool[rows])[0]
            out.append(ep.customer.answers[int(np.argmax(sim))])
        return out


# ---- rollouts --------------------------------------------------------------------------------
def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big") >> 1


def roll_out(agent: Agent, agent_id: str, customer: LearnedCustomer, episodes: int | None = None,
             seed: int | None = None) -> ExperienceStore:  # fmt: skip
    """``episodes`` dialogues of ``agent`` with the learned customer, as an unrated store
    (one row per dialogue, ``source`` = learned-customer; ``meta`` names the replayed logged
    dialogue and why the rollout ended: final, or max_turns)."""
    cfg = customer.config
    n = cfg.episodes if episodes is None else episodes
    base = cfg.seed if seed is None else seed
    eps = customer.episodes(n, seed=base)
    histories = [[Turn("user", ep.customer.opening)] for ep in eps]
    active = list(range(n))
    for k in range(customer.max_agent_turns):
        if not active:
            break
        replies = []
        for i in active:
            got = agent.respond(histories[i], n=1, seed=_seed(base, agent_id, i, k))
            if len(got) != 1 or not isinstance(got[0], str):
                raise RolloutError(f"agent {agent_id!r} returned {got!r} for n=1 (expected one string)")
            histories[i].append(Turn("agent", got[0]))
            replies.append(got[0])
        answers = customer.react([eps[i] for i in active], replies)
        still = []
        for i, answer in zip(active, answers):
            if answer is not None:
                histories[i].append(Turn("user", answer))
                still.append(i)
        active = still
    for i in active:
        eps[i].ended = "max_turns"
        # the customer's last answer got no reply within the turn limit: drop it, so every
        # rollout ends on the agent's turn as the logged dialogues do
        if histories[i][-1].role == "user":
            histories[i].pop()
    return _to_store(agent_id, eps, histories, base)


def _to_store(agent_id: str, eps: list[Episode], histories: list[list[Turn]], seed: int) -> ExperienceStore:
    d = {"dialog_id": [], "agent_id": [], "source": [], "n_turns": [], "meta": []}
    t = {"dialog_id": [], "turn_index": [], "role": [], "text": []}
    for ep, turns in zip(eps, histories):
        did = f"rollout:{agent_id}:{ep.index:04d}"
        d["dialog_id"].append(did)
        d["agent_id"].append(agent_id)
        d["source"].append(SOURCE)
        d["n_turns"].append(len(turns))
        d["meta"].append(json.dumps({"customer_dialog": ep.customer.dialog_id, "customer_agent": ep.customer.agent_id,
                                     "ended": ep.ended, "episode": ep.index, "seed": seed}, sort_keys=True))
        for j, turn in enumerate(turns):
            t["dialog_id"].append(did)
            t["turn_index"].append(j)
            t["role"].append(turn.role)
            t["text"].append(turn.text)
    return ExperienceStore(pa.table(d, schema=S.dialogues_schema([])), pa.table(t, schema=S.TURNS_SCHEMA))


def concat_stores(stores: Sequence[ExperienceStore]) -> ExperienceStore:
    if not stores:
        raise RolloutError("no rollouts to combine")
    return ExperienceStore(pa.concat_tables([s.dialogues for s in stores]), pa.concat_tables([s.turns for s in stores]))


def leave_one_out_rollouts(
    experience: ExperienceStore,
    agents: dict[str, Agent],
    config: LearnedCustomerConfig | None = None,
    *,
    embedder: Embedder | None = None,
    progress: bool = False,
) -> ExperienceStore:
    """Every agent's rollouts with a customer learned from the OTHER agents' logged dialogues
    (its own are excluded, as its rated dialogues are under leave-one-agent-out)."""
    from tqdm.auto import tqdm

    cfg = config or LearnedCustomerConfig()
    known = set(experience.agents())
    out = []
    shared = None
    if cfg.similarity == "embedding":
        # one embedder for all agents: the pool's vectors load from the cache once
        shared = make_similarity(cfg, embedder).embedder
    for agent_id, agent in tqdm(agents.items(), desc="learned-customer rollouts", unit="agent", disable=not progress):
        exclude = (agent_id,) if agent_id in known else ()
        customer = LearnedCustomer(experience, cfg, embedder=shared, exclude_agents=exclude)
        out.append(roll_out(agent, agent_id, customer))
    return concat_stores(out)
