"""The agreement block of the frozen encoder (``dice.agreement``): how far the logged dialogue
has followed the target agent so far (``agreement_features``)."""

from __future__ import annotations

import functools

import torch

from enigma.encoders.base import pair_block
from enigma.encoders.text_tokens import f1, facts, words

# per similarity measure: this turn, min and mean over earlier turns, joint min, joint min ** 4
_PER_MEASURE = 5
AGREEMENT_MEASURES = ("cosine", "words", "facts")
AGREEMENT_DIM = _PER_MEASURE * len(AGREEMENT_MEASURES)


@functools.lru_cache(maxsize=1 << 16)
def _agreement_tokens(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A reply's words and factual tokens (``words``, ``facts``) for ``agreement_features``'s word
    and fact F1, kept across calls: the same logged replies are compared again for every held-out
    agent. Tuples, so that what is kept cannot be changed; ``f1`` reads them as it read the lists."""
    return tuple(words(text)), tuple(facts(text))


def _summarise(current: list[float], history: list[list[float]]) -> list[float]:
    """Per measure: [this turn, min and mean over the earlier turns (1 at the first), joint
    min, joint min ** 4]. The joint minimum is 'every turn so far, this one included, agreed';
    the power sharpens it towards an indicator, which linear heads cannot form themselves."""
    out: list[float] = []
    for m, cur in enumerate(current):
        past = [h[m] for h in history]
        lo = min(past) if past else 1.0
        mean = sum(past) / len(past) if past else 1.0
        joint = min(cur, lo)
        out += [cur, lo, mean, joint, joint**4]
    return out


def agreement_features(
    vectors: torch.Tensor,
    texts: list[str],
    logged: torch.Tensor,
    target: torch.Tensor,
    target_valid: torch.Tensor,
    n_agent_turns: torch.Tensor,
) -> torch.Tensor:
    """How far the logged dialogue has followed the target agent so far.

    The true ratio ``d^pi/d^D`` at agent turn k is, with the human's turns common to both sides,
    ``prod_{j<=k} pi(a_j|s_j)`` over the logging mixture's probability of the same actions: it is
    large only on dialogues whose agent turns are ones the target would have taken. Comparing
    each logged reply with the target's replies at the same state measures that; because the
    target policy is fixed during training, the comparison is a function of the state (earlier
    turns) and the action (this turn), so zeta and nu may read it. No model of the target or of
    the logging agents is fitted: the features only compare texts.

    Three measures of agreement between two replies (``AGREEMENT_MEASURES``): the cosine of their
    sentence vectors, word F1, and F1 of their factual tokens (``facts``), each summarised by
    ``_summarise``. The logged reply is compared with the target's samples at its state; a
    target sample with the other samples (1 when there is only one).
    """
    t_all, s_max = target.shape
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    tokens: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    pairs: dict[tuple[int, int], list[float]] = {}

    def similarity(a: int, b: int) -> list[float]:
        key = (a, b) if a <= b else (b, a)
        if key not in pairs:
            for r in key:
                if r not in tokens:
                    tokens[r] = _agreement_tokens(texts[r])
            if a == b:
                pairs[key] = [1.0, 1.0, 1.0]
            else:
                cos = float(unit[a] @ unit[b]) if a and b else 0.0
                pairs[key] = [cos, f1(tokens[a][0], tokens[b][0]), f1(tokens[a][1], tokens[b][1])]
        return pairs[key]

    def mean(rows: list[list[float]]) -> list[float]:
        return [sum(col) / len(rows) for col in zip(*rows)] if rows else [1.0] * len(AGREEMENT_MEASURES)

    # the index tensors read as lists once, and every turn's rows gathered before one conversion
    # (``pair_block``; the places of absent samples stay ones): the same values as writing the
    # tensor row by row, without microseconds of tensor indexing per element
    targets, valid, logged_rows = target.tolist(), target_valid.tolist(), logged.tolist()
    ones = [1.0] * AGREEMENT_DIM
    rows: list[list] = []
    r = 0
    for n in n_agent_turns.tolist():
        history: list[list[float]] = []
        for _ in range(n):
            samples = [b for b, ok in zip(targets[r], valid[r]) if ok]
            a = logged_rows[r]
            current = mean([similarity(a, b) for b in samples])
            pair = [_summarise(current, history)] + [ones] * s_max
            for s, b in enumerate(samples):
                others = samples[:s] + samples[s + 1 :]
                pair[1 + s] = _summarise(mean([similarity(b, o) for o in others]), history)
            rows.append(pair)
            history.append(current)
            r += 1
    if r < t_all:  # rows past the dialogues' turns (none when the lengths add up to the rows) stay ones
        rows += [[ones] * (1 + s_max)] * (t_all - r)
    return pair_block(rows, s_max, AGREEMENT_DIM)
