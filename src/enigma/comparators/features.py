"""Hand-crafted dialogue features of See et al. (2019), per dialogue, over the scored agent turns.

- ``self_repetition``: share of a reply's word bigrams already said by the agent earlier in the
  dialogue (See's "external repetition"; the attribute their avoid_rep rating tracks).
- ``internal_repetition``: share of a reply's bigrams that repeat within the reply itself.
- ``partner_repetition``: share of a reply's bigrams copied from the user's preceding turn.
- ``question_rate``: share of replies containing a question mark.
- ``specificity``: mean normalised inverse document frequency (NIDF) of the reply's words, the
  document frequencies counted over every utterance of the experience data.
- ``relatedness``: cosine between the embeddings of a reply and of the user turn before it.
- ``length``: words per reply.

Each is a dialogue-level mean over the scored agent turns. The per-reply pieces (words, bigrams,
the repetition shares) are ``enigma.reply_measures``, which ENIGMA's ``dice.reply_measures`` reads too.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

import numpy as np

from enigma.comparators.dialogues import AgentDialogue
from enigma.reply_measures import bigrams, internal_repetition, last_user_turn, overlap_share, words

FEATURES: tuple[str, ...] = (
    "self_repetition",
    "internal_repetition",
    "partner_repetition",
    "question_rate",
    "specificity",
    "relatedness",
    "length",
)
# features that need no text encoder (cheap; the default for SPE's extra inputs)
TEXT_ONLY_FEATURES = tuple(f for f in FEATURES if f != "relatedness")

class Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class NidfTable:
    """Word -> NIDF in [0, 1] from utterance-level document frequencies. Words never seen
    count as the rarest (NIDF 1): a reply of unseen words is maximally specific."""

    idf: dict[str, float]
    lo: float
    hi: float

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "NidfTable":
        df: Counter[str] = Counter()
        n = 0
        for t in texts:
            n += 1
            df.update(set(words(t)))
        if n == 0 or not df:
            raise ValueError("cannot build NIDF from no text")
        idf = {w: math.log(n / c) for w, c in df.items()}
        return cls(idf, min(idf.values()), math.log(n))  # log(n): df 1, the rarest possible

    def nidf(self, word: str) -> float:
        if self.hi <= self.lo:
            return 1.0
        return (self.idf.get(word, self.hi) - self.lo) / (self.hi - self.lo)

    def specificity(self, tokens: Sequence[str]) -> float:
        if not tokens:
            return 0.0
        return float(np.mean([self.nidf(w) for w in tokens]))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a @ b) / (na * nb)


class FeatureExtractor:
    """Computes the named features for a list of dialogues as a matrix [n_dialogues, n_features].

    ``nidf`` is needed for ``specificity`` and ``embedder`` for ``relatedness``.
    """

    def __init__(self, nidf: NidfTable | None = None, embedder: Embedder | None = None):
        self.nidf = nidf
        self.embedder = embedder

    def matrix(self, dialogues: Sequence[AgentDialogue], names: Sequence[str]) -> np.ndarray:
        unknown = [n for n in names if n not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature(s) {unknown}; known: {list(FEATURES)}")
        if "specificity" in names and self.nidf is None:
            raise ValueError("specificity needs an NIDF table")
        related = self._relatedness(dialogues) if "relatedness" in names else None
        rows = []
        for k, d in enumerate(dialogues):
            f = self._text_features(d, names)
            if related is not None:
                f["relatedness"] = related[k]
            rows.append([f[n] for n in names])
        return np.asarray(rows, dtype=np.float64).reshape(len(dialogues), len(names))

    def _text_features(self, d: AgentDialogue, names: Sequence[str]) -> dict[str, float]:
        scored = set(d.scored)
        self_rep, int_rep, partner, question, spec, length = [], [], [], [], [], []
        said: set = set()  # the agent's bigrams so far in this dialogue
        any_agent_before = False
        for i, turn in enumerate(d.turns):
            if turn.role != "agent":
                continue
            tokens = words(turn.text)
            grams = bigrams(tokens)
            if i in scored:
                if any_agent_before:
                    self_rep.append(overlap_share(grams, said))
                int_rep.append(internal_repetition(tokens))
                prev_user = last_user_turn(d.turns[:i])
                partner.append(overlap_share(grams, set(bigrams(words(prev_user.text)))) if prev_user else 0.0)
                question.append(1.0 if "?" in turn.text else 0.0)
                if "specificity" in names:
                    spec.append(self.nidf.specificity(tokens))  # type: ignore[union-attr]
                length.append(float(len(tokens)))
            said.update(grams)
            any_agent_before = True

        def mean(v: list[float]) -> float:
            return float(np.mean(v)) if v else 0.0

        return {
            "self_repetition": mean(self_rep),
            "internal_repetition": mean(int_rep),
            "partner_repetition": mean(partner),
            "question_rate": mean(question),
            "specificity": mean(spec),
            "length": mean(length),
        }

    def _relatedness(self, dialogues: Sequence[AgentDialogue]) -> list[float]:
        if self.embedder is None:
            raise ValueError("relatedness needs a text embedder")
        pairs: list[list[tuple[str, str]]] = []
        texts: dict[str, int] = {}
        for d in dialogues:
            ps = []
            for i in d.scored:
                prev = next((d.turns[j].text for j in range(i - 1, -1, -1) if d.turns[j].role == "user"), None)
                if prev is not None:
                    ps.append((d.turns[i].text, prev))
                    texts.setdefault(d.turns[i].text, len(texts))
                    texts.setdefault(prev, len(texts))
            pairs.append(ps)
        vecs = self.embedder.embed(list(texts)) if texts else np.zeros((0, 1), dtype=np.float32)
        out = []
        for ps in pairs:
            sims = [_cosine(vecs[texts[a]], vecs[texts[b]]) for a, b in ps]
            out.append(float(np.mean(sims)) if sims else 0.0)
        return out
