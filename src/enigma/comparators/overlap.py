"""Reference-based metrics of the agent's replies at logged states (regime a): BLEU and ROUGE-L
against the logged reply at the same state.

These ignore the ratings. A score can only be calibrated on the other agents if their replies
at the same states were known, and they are not (for their own dialogues the reference IS their
reply), so the raw score is returned, unchanged, for every rating: a higher overlap is taken to
mean a better agent, as in the ENIGMA paper's comparison. Correlations are invariant to that
choice of scale; a rating that falls with overlap shows up as a negative correlation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import sacrebleu
from rouge_score import rouge_scorer

from enigma.comparators.config import fingerprint_of
from enigma.comparators.dialogues import target_replies
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.dialogue import Turn
from enigma.store.experience import ExperienceStore


@dataclass(frozen=True)
class ReplyPair:
    dialog_id: str
    turn_index: int
    reply: str  # the target's reply
    reference: str  # the logged reply at the same state
    context_turns: tuple[Turn, ...]  # the turns before it, oldest first


def reply_pairs(experience: ExperienceStore, target: HeldOutAgent) -> tuple[list[ReplyPair], int]:
    rows, failed, histories = target_replies(experience, target)
    pairs = []
    for r in rows:
        turns = histories[r.dialog_id]
        pairs.append(
            ReplyPair(r.dialog_id, r.turn_index, r.text, turns[r.turn_index].text, tuple(turns[: r.turn_index]))
        )
    return pairs, failed


def corpus_bleu(replies: list[str], references: list[str]) -> float:
    """sacrebleu's corpus BLEU (13a tokenisation, exponential smoothing) on the 0-1 scale."""
    if len(replies) != len(references) or not replies:
        raise ValueError(f"BLEU needs as many replies as references, both non-empty ({len(replies)}, {len(references)})")
    return float(sacrebleu.corpus_bleu(replies, [references]).score) / 100.0


_ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def mean_rouge_l(replies: list[str], references: list[str]) -> float:
    """Mean ROUGE-L F-measure (longest common subsequence, Porter stemming)."""
    if len(replies) != len(references) or not replies:
        raise ValueError(f"ROUGE needs as many replies as references, both non-empty ({len(replies)}, {len(references)})")
    # Each distinct (reply, reference) pair is scored once: template-like agents repeat pairs
    # many times, and stemming is the cost (airline: about 2 s per agent before, see
    # studies/results/comparators_airline_cost.json).
    counts = Counter(zip(replies, references))
    total = sum(_ROUGE.score(ref, hyp)["rougeL"].fmeasure * c for (hyp, ref), c in counts.items())
    return float(total / len(replies))


class ReplyMetricEstimator:
    """Base: a rating-free score of the target's replies vs the logged ones, returned for every
    rating (see the module docstring)."""

    regimes = frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    name = ""

    def fingerprint(self) -> str:
        return fingerprint_of(self.name)

    def score(self, pairs: list[ReplyPair]) -> tuple[float, dict[str, Any]]:
        """The score of the replies, and what the metric reports about how it got it."""
        raise NotImplementedError

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        pairs, failed = reply_pairs(experience, target)
        value, extra = self.score(pairs)
        diagnostics = {**extra, "n_replies": len(pairs), "n_failed_replies": failed, "score": value}
        return EstimateResult({n: value for n in experience.rating_names}, diagnostics=diagnostics)


class BleuEstimator(ReplyMetricEstimator):
    name = "bleu[replies-at-logged-states]"

    def score(self, pairs: list[ReplyPair]) -> tuple[float, dict[str, Any]]:
        return corpus_bleu([p.reply for p in pairs], [p.reference for p in pairs]), {}


class RougeLEstimator(ReplyMetricEstimator):
    name = "rouge-l[replies-at-logged-states]"

    def score(self, pairs: list[ReplyPair]) -> tuple[float, dict[str, Any]]:
        return mean_rouge_l([p.reply for p in pairs], [p.reference for p in pairs]), {}
