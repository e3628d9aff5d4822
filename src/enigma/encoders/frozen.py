"""The frozen pair encoder: state-action vectors assembled from cached sentence embeddings.

The CPU default. Every utterance is embedded once by the frozen sentence encoder through
``EmbeddingCache`` (on disk, keyed by text), so across a leave-one-agent-out study only each
held-out agent's own sampled replies are new; the logged dialogues are never re-encoded.

Featurisation of the pair (history ``turns[:t]``, reply ``a``) at agent turn ``k``:

    [ e(a) | e(last user utterance) | e(previous agent reply) | mean e(earlier turns) | onehot(k) ]

* ``e(a)``: the action. The logged and target pairs of a turn differ only in this block.
* the last user utterance: what the reply answers; the most informative part of the state.
* the previous agent reply: the agent's own last move (consistency, repetition).
* the mean of the remaining earlier turns: a cheap summary of the longer history, so states
  with the same last exchange but different pasts are still told apart.
* ``first_user`` (not in the default blocks): the user's first non-blank turn on its own, the
  request a task dialogue is about, which the summary's mean dilutes as the dialogue grows.
* ``onehot(k)``: the agent-turn position (bucketed: ``k >= position_buckets - 1`` share the last
  bucket). The DICE chain is per slot, so where in the dialogue a pair sits matters.
A block with nothing to show (no such turn, or a blank utterance, e.g. the empty first user
turn of dialogues that the agent opens) is zeros. ``e`` is the mean-pooled, L2-normalised
sentence embedding; the summary block is a mean of unit vectors, not renormalised.

Five optional blocks follow, outside any projection (``passthrough_dim``), in this order:
``grounding`` (``enigma.encoders.grounding``: how much of what the reply asserts, its numbers and
names, the dialogue had not mentioned before it), ``reply_measures`` (``enigma.reply_measures``: how
much of the reply repeats the agent's earlier turns, itself or the user's last turn, whether it
asks, its length), ``request`` (``enigma.encoders.request``: how close the reply is to the user's
opening request), ``knowledge`` (``enigma.encoders.knowledge``: what a knowledge base says about the
entities the reply names, against the user's words; three to five numbers, the base's
``knowledge_measures``), the four properties of the pair itself, and ``agreement``
(``enigma.encoders.agreement``: how far the logged dialogue has followed the target so far). A
reply retrieved by a stand-in is read in the conversation it was said in
(``enigma.encoders.sources``).

``blocks`` selects the state blocks (``DEFAULT_BLOCKS`` by default; e.g. ``("last_user", "position")``
for a smaller vector: the reply block is always there).

``prepare`` looks every text up once and returns index tensors into one embedding table (its
row 0 is the zero vector; the history summaries are appended as extra rows), so ``forward`` is
a lookup. With ``projection_dim`` a trainable linear map (and the encoder's ``dim``) sits on top;
without it the encoder has no parameters and the trainer can compute its outputs once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from enigma.encoders.agreement import AGREEMENT_DIM, agreement_features
from enigma.encoders.base import DialogueActions, PairEncoder, pad_rows, pair_block, rows_of
from enigma.encoders.grounding import GROUNDING_DIM, Mentioned, grounding_features
from enigma.encoders.knowledge import (KnowledgeBase, Lookup, checks_against_user, knowledge_features, knowledge_measures,
                                       latest_request, reads_requests, unrequested)
from enigma.encoders.request import REQUEST_DIM, request_features
from enigma.encoders.sources import source_said, source_turns, speaker_view
from enigma.encoders.text_cache import EmbeddingCache
from enigma.reply_measures import REPLY_MEASURES_DIM, agent_bigrams, bigrams, reply_measures
from enigma.reply_measures import words as word_tokens

# The state blocks, in the order they follow the reply embedding.
STATE_BLOCKS = ("last_user", "prev_agent", "summary", "first_user", "position")
DEFAULT_BLOCKS = ("last_user", "prev_agent", "summary", "position")
# whose earlier turns a target reply follows: the logged dialogue's; the target's own replies at the
# dialogue's earlier agent turns (what the user would have read from the target); or, for a reply
# retrieved by a stand-in that records its sources, the conversation it was said in (else logged)
TARGET_HISTORIES = ("logged", "own", "source")


@dataclass
class FrozenPrepared:
    """Index tensors into one embedding table, one row per real agent turn (ragged: the rows of
    dialogue i are consecutive, ``n_agent_turns[i]`` of them), so that a store's memory grows with
    its agent turns and not with its longest dialogue."""

    table: torch.Tensor  # [R, d] float32; row 0 is zeros
    n_agent_turns: torch.Tensor  # [N] long
    max_agent_turns: int  # K of the padded layout ``forward`` returns
    logged_reply: torch.Tensor  # [T] rows of the logged replies
    target_reply: torch.Tensor  # [T, S] rows of the target replies
    last_user: torch.Tensor  # [T]
    prev_agent: torch.Tensor  # [T]
    summary: torch.Tensor  # [T] rows of the history summaries
    position: torch.Tensor  # [T] bucketed agent-turn index
    target_valid: torch.Tensor  # [T, S] bool: a real sample
    first_user: torch.Tensor | None = None  # [T] the user's first non-blank turn; None without the block
    # [T, 1 + S, AGREEMENT_DIM] agreement features of the logged pair (index 0) and of each
    # target sample; None when the encoder has no agreement block
    agreement: torch.Tensor | None = None
    # [T, 1 + S, GROUNDING_DIM] grounding features, laid out the same way; None without the block
    grounding: torch.Tensor | None = None
    # [T, 1 + S, REPLY_MEASURES_DIM] the replies' measures, laid out the same way; None without the block
    reply_measures: torch.Tensor | None = None
    # [T, 1 + S, REQUEST_DIM] the replies' closeness to the opening request, laid out the same way
    request: torch.Tensor | None = None
    # [T, 1 + S, K] the replies' looked-up facts against the user's words, laid out the same way
    # (K: the base's knowledge_measures)
    knowledge: torch.Tensor | None = None
    # [T, S] rows of the previous agent turn each target sample's prev_agent block reads instead of
    # the logged one (``target_history`` own: the sample's own previous reply; source: its
    # speaker's previous turn in its source chat); None: the logged one
    target_prev: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.n_agent_turns.shape[0])

    def rows(self, index: torch.Tensor | None = None) -> torch.Tensor:
        """The turn rows of the dialogues at ``index`` (all when None), in that order."""
        return rows_of(self.n_agent_turns, index)


class FrozenPairEncoder(PairEncoder):
    """``FrozenPairEncoder(EmbeddingCache("minilm", cache_dir))``, or a model name/directory:
    ``FrozenPairEncoder("minilm", cache_dir=...)`` builds the cache itself."""

    def __init__(
        self,
        cache: EmbeddingCache | str | os.PathLike[str] = "minilm",
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        position_buckets: int = 16,
        projection_dim: int | None = None,
        blocks: tuple[str, ...] = DEFAULT_BLOCKS,
        agreement: bool = False,
        grounding: bool = False,
        reply_measures: bool = False,
        request: bool = False,
        knowledge: KnowledgeBase | None = None,
        target_history: str = "source",
    ) -> None:
        super().__init__()
        if target_history not in TARGET_HISTORIES:
            raise ValueError(f"target_history: expected one of {TARGET_HISTORIES}, got {target_history!r}")
        self.target_history = target_history
        if position_buckets < 1:
            raise ValueError("position_buckets must be >= 1")
        unknown = [b for b in blocks if b not in STATE_BLOCKS]
        if unknown or len(set(blocks)) != len(blocks):
            raise ValueError(f"blocks: expected distinct names from {STATE_BLOCKS}, got {list(blocks)}")
        # kept in the canonical order whatever order they were given in
        self.blocks = tuple(b for b in STATE_BLOCKS if b in blocks)
        if projection_dim is not None and projection_dim < 1:
            raise ValueError("projection_dim must be >= 1 or None")
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache, cache_dir)
        self.text_dim = self.cache.dim
        self.position_buckets = position_buckets
        text_blocks = sum(1 for b in self.blocks if b != "position")
        self.feature_dim = (1 + text_blocks) * self.text_dim + (position_buckets if "position" in self.blocks else 0)
        self.projection = nn.Linear(self.feature_dim, projection_dim) if projection_dim else None
        self.agreement = agreement
        self.grounding = grounding
        self.reply_measures = reply_measures
        self.request = request
        self.knowledge = knowledge
        self.knowledge_dim = len(knowledge_measures(knowledge)) if knowledge is not None else 0
        self.reads_requests = knowledge is not None and reads_requests(knowledge)
        self.checks_against_user = knowledge is not None and checks_against_user(knowledge)
        # the grounding, reply-measure, request, knowledge and agreement features stay outside any
        # projection (the trainer's PCA included), in that order; the first four, like the text,
        # describe the pair alone, so the fitted Q reads them with the text (``pair_passthrough_dim``)
        self.pair_passthrough_dim = ((GROUNDING_DIM if grounding else 0) + (REPLY_MEASURES_DIM if reply_measures else 0)
                                     + (REQUEST_DIM if request else 0) + self.knowledge_dim)
        self.passthrough_dim = self.pair_passthrough_dim + (AGREEMENT_DIM if agreement else 0)
        self.dim = (projection_dim or self.feature_dim) + self.passthrough_dim

    def _source_customer(self, source: str) -> tuple[frozenset[str], str | None, tuple[str, ...]]:
        """What the knowledge block holds a retrieved reply to: its own customer's words, latest
        request and turns (``source``: the reply's own conversation, ``source_turns``)."""
        turns = source_turns(source)
        request = latest_request(self.knowledge, turns) if self.reads_requests else None
        return (frozenset(source_said(source, "user").words), request,
                tuple(turn.text for turn in turns if turn.role == "user"))

    def prepare(self, dialogues: list[DialogueActions], max_agent_turns: int) -> FrozenPrepared:
        rows: dict[str, int] = {}

        def row(text: str) -> int:
            if not text.strip():
                return 0
            return rows.setdefault(text, len(rows) + 1)

        s_max = max((len(r) for d in dialogues for r in d.target_replies), default=1) or 1
        n_turns = [d.n_agent_turns for d in dialogues]
        t_all = sum(n_turns)
        # Every per-turn value is gathered in Python lists, one entry per turn row, and made a
        # tensor once after the loop (``_long``, ``pair_block``): an element or row written into
        # a tensor one at a time cost microseconds a write, several per turn. The values are
        # the same (a float block's Python floats are rounded to float32 either way).
        logged: list[int] = []
        target: list[list[int]] = []
        last_user: list[int] = []
        prev_agent: list[int] = []
        first_user: list[int] | None = [] if "first_user" in self.blocks or self.request else None
        position: list[int] = []
        target_valid: list[list[bool]] = []
        own = self.target_history == "own"
        # without any sources, "source" is the logged reading: no per-sample state to build
        from_source = self.target_history == "source" and any(d.target_sources is not None for d in dialogues)
        target_prev: list[list[int]] | None = [] if own or from_source else None
        # per turn row, the logged pair's features then each target sample's (None: zeros)
        grounded: list[list] | None = [] if self.grounding else None
        measured: list[list] | None = [] if self.reply_measures else None
        known: list[list] | None = [] if self.knowledge is not None else None
        looked_up: dict[str, Lookup] = {}  # reply text -> its lookup: a store repeats its replies
        customers: dict[str, tuple] = {}  # a retrieved reply's source -> its customer (_source_customer)
        # earlier-history summaries: per turn row the text rows to average
        summary_members: list[list[int]] = []
        r = 0
        for d in dialogues:
            _check(d, max_agent_turns)
            said = Mentioned()
            user_said = Mentioned()  # the user's words alone: what the looked-up facts are held against
            asked, heard = None, 0  # the user's latest stated request, and the turns read for it
            agent_said: set = set()  # the agent's bigrams before turn t
            own_said = [set() for _ in range(s_max)] if own else None  # each target sample's own bigrams, before turn t
            seen = 0
            for k, t in enumerate(d.agent_turns):
                history = d.turns[:t]
                n_samples = len(d.target_replies[k])
                if measured is not None:
                    agent_said |= agent_bigrams(d.turns[seen:t])
                    seen = t
                    pair = [reply_measures(d.turns[t].text, history, agent_said)] + [None] * s_max
                    for s, reply in enumerate(d.target_replies[k]):
                        where = d.source_of(k, s) if from_source else None
                        if where is not None:
                            pair[1 + s] = reply_measures(reply, *speaker_view(where))
                        else:
                            pair[1 + s] = reply_measures(reply, history, own_said[s] if own else agent_said)
                        if own:
                            own_said[s] |= set(bigrams(word_tokens(reply)))
                    measured.append(pair)
                if known is not None:
                    user_said.extend(history, role="user")
                    if self.reads_requests:
                        asked, heard = latest_request(self.knowledge, history[heard:], asked), len(history)
                    if self.checks_against_user:
                        user_texts = tuple(turn.text for turn in history if turn.role == "user")
                    pair = [None] * (1 + s_max)
                    for s, reply in enumerate((d.turns[t].text, *d.target_replies[k])):
                        if reply not in looked_up:
                            looked_up[reply] = self.knowledge.lookup(reply)
                        where = d.source_of(k, s - 1) if s else None
                        if where is None:
                            words, request, texts = user_said.words, asked, (user_texts if self.checks_against_user else ())
                        else:  # a retrieved reply is held to the customer it answered
                            if where not in customers:
                                customers[where] = self._source_customer(where)
                            words, request, texts = customers[where]
                        features = knowledge_features(looked_up[reply], words)
                        if self.reads_requests:
                            features.append(unrequested(looked_up[reply], request))
                        if self.checks_against_user:
                            features.append(float(self.knowledge.refutes(reply, texts)))
                        pair[s] = features
                    known.append(pair)
                if grounded is not None:
                    said.extend(history)
                    pair = [grounding_features(d.turns[t].text, said)] + [None] * s_max
                    for s, reply in enumerate(d.target_replies[k]):
                        # a retrieved reply is grounded, or not, in the conversation it was said in
                        where = d.source_of(k, s)
                        pair[1 + s] = grounding_features(reply, said if where is None else source_said(where))
                    grounded.append(pair)
                user_at = next((j for j in range(t - 1, -1, -1) if history[j].role == "user"), None)
                agent_at = next((j for j in range(t - 1, -1, -1) if history[j].role == "agent"), None)
                logged.append(row(d.turns[t].text))
                target.append([row(reply) for reply in d.target_replies[k]] + [0] * (s_max - n_samples))
                target_valid.append([True] * n_samples + [False] * (s_max - n_samples))
                last_user.append(row(history[user_at].text) if user_at is not None else 0)
                prev_agent.append(row(history[agent_at].text) if agent_at is not None else 0)
                if own:
                    # the sample drawn at the previous agent turn, where there was one; else the logged reply
                    if k:
                        target_prev.append([x if valid else prev_agent[r] for x, valid in zip(target[r - 1], target_valid[r - 1])])
                    else:
                        target_prev.append([0] * s_max)
                elif from_source:
                    prev = [prev_agent[r]] * s_max
                    for s in range(n_samples):
                        where = d.source_of(k, s)
                        if where is not None:
                            before = speaker_view(where)[0]
                            prev[s] = next((row(u.text) for u in reversed(before) if u.role == "agent"), 0)
                    target_prev.append(prev)
                if first_user is not None:
                    first_user.append(next((row(u.text) for u in history if u.role == "user" and u.text.strip()), 0))
                earlier = [row(history[j].text) for j in range(t) if j not in (user_at, agent_at)]
                summary_members.append([x for x in earlier if x])
                position.append(min(k, self.position_buckets - 1))
                r += 1
        logged, target, last_user, prev_agent, position = map(_long, (logged, target, last_user, prev_agent, position))
        target = target.reshape(t_all, s_max)
        target_valid = torch.tensor(target_valid, dtype=torch.bool).reshape(t_all, s_max)
        first_user = _long(first_user) if first_user is not None else None
        target_prev = _long(target_prev).reshape(t_all, s_max) if target_prev is not None else None
        grounded = pair_block(grounded, s_max, GROUNDING_DIM) if grounded is not None else None
        measured = pair_block(measured, s_max, REPLY_MEASURES_DIM) if measured is not None else None
        known = pair_block(known, s_max, self.knowledge_dim) if known is not None else None
        texts = list(rows)
        vectors = self.cache.embed(texts) if texts else np.zeros((0, self.text_dim), np.float32)
        base = np.concatenate([np.zeros((1, self.text_dim), np.float32), vectors])
        summary = torch.zeros(t_all, dtype=torch.long)
        summaries = np.zeros((t_all, self.text_dim), np.float32)
        for m, members in enumerate(summary_members):
            if members:
                summaries[m] = base[members].mean(axis=0)
                summary[m] = len(base) + m
        table = torch.from_numpy(np.concatenate([base, summaries]))
        lengths = torch.tensor(n_turns, dtype=torch.long)
        texts_of, vectors_of = [""] + texts, table[: len(base)]  # row -> text and vector (row 0 is the blank)
        requested = None
        if self.request:
            requested = request_features(vectors_of, texts_of, first_user, logged, target, target_valid)
        if "first_user" not in self.blocks:
            first_user = None  # the request block's alone: not a state block
        agree = None
        if self.agreement:
            agree = agreement_features(vectors_of, texts_of, logged, target, target_valid, lengths)
        return FrozenPrepared(table, lengths, max_agent_turns, logged, target, last_user, prev_agent, summary, position,
                              target_valid, first_user, agree, grounded, measured, requested, known, target_prev)

    def turn_rows(self, prepared: FrozenPrepared, index: torch.Tensor, n_agent_turns: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """The pair vectors of the real agent turns of the dialogues at ``index``, ragged
        (``logged`` [T, dim], ``target`` [T, S, dim]): table lookups, no padded batch."""
        r = prepared.rows(index.cpu())
        table = prepared.table
        parts = {
            "last_user": lambda: table[prepared.last_user[r]],
            "prev_agent": lambda: table[prepared.prev_agent[r]],
            "summary": lambda: table[prepared.summary[r]],
            "first_user": lambda: table[prepared.first_user[r]],
            "position": lambda: nn.functional.one_hot(prepared.position[r], self.position_buckets).to(table.dtype),
        }
        state = torch.cat([parts[b]() for b in self.blocks] or [table.new_zeros(len(r), 0)], dim=-1)  # [T, *]
        target_reply = table[prepared.target_reply[r]]  # [T, S, d]
        logged = torch.cat([table[prepared.logged_reply[r]], state], dim=-1)
        target_state = state.unsqueeze(1).expand(-1, target_reply.shape[1], -1)
        if prepared.target_prev is not None and "prev_agent" in self.blocks:
            at = sum(self.position_buckets if b == "position" else table.shape[1]
                     for b in self.blocks[: self.blocks.index("prev_agent")])
            target_state = torch.cat([target_state[..., :at], table[prepared.target_prev[r]],
                                      target_state[..., at + table.shape[1]:]], dim=-1)
        target = torch.cat([target_reply, target_state], dim=-1)
        target_valid = prepared.target_valid[r]
        if self.projection is not None:
            device = self.projection.weight.device
            logged, target = self.projection(logged.to(device)), self.projection(target.to(device))
            target_valid = target_valid.to(device)
        # the passthrough blocks, each [T, 1 + S, width]: the logged pair's, then each target sample's
        for block in (prepared.grounding, prepared.reply_measures, prepared.request, prepared.knowledge, prepared.agreement):
            if block is not None:
                block = block[r].to(logged.device)
                logged = torch.cat([logged, block[:, 0]], dim=-1)
                target = torch.cat([target, block[:, 1:]], dim=-1)
        target = target * target_valid.unsqueeze(-1).to(target.dtype)
        return logged, target

    def forward(self, prepared: FrozenPrepared, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index = index.cpu()
        logged, target = self.turn_rows(prepared, index)
        n, k_max = prepared.n_agent_turns[index], prepared.max_agent_turns
        return pad_rows(logged, n, k_max), pad_rows(target, n, k_max)


def _long(values: list) -> torch.Tensor:
    """A per-turn list of ints (or of lists of ints) as a long tensor."""
    return torch.tensor(values, dtype=torch.long)


def _check(d: DialogueActions, max_agent_turns: int) -> None:
    if d.n_agent_turns > max_agent_turns:
        raise ValueError(f"dialogue {d.dialog_id}: {d.n_agent_turns} agent turns, more than max_agent_turns={max_agent_turns}")
    if len(d.target_replies) != d.n_agent_turns:
        raise ValueError(f"dialogue {d.dialog_id}: {d.n_agent_turns} agent turns but target replies for {len(d.target_replies)}")
    for k, t in enumerate(d.agent_turns):
        if not 0 <= t < len(d.turns) or d.turns[t].role != "agent":
            raise ValueError(f"dialogue {d.dialog_id}: agent_turns[{k}] = {t} is not the index of an agent turn")
        for s, reply in enumerate(d.target_replies[k]):
            if not isinstance(reply, str):
                raise ValueError(f"dialogue {d.dialog_id}, agent turn {k}, sample {s}: target reply is {type(reply).__name__}, expected str")
