"""A reply's words and factual tokens, and the F1 of two token lists: what the agreement,
grounding and request blocks of the frozen encoder compare (``agreement``, ``grounding``,
``request``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"[A-Za-z0-9$:']+|[.!?]")


def f1(wa: Sequence[str], wb: Sequence[str]) -> float:
    if not wa and not wb:
        return 1.0
    common = sum(min(wa.count(w), wb.count(w)) for w in set(wa))
    if common == 0:
        return 0.0
    p, r = common / len(wa), common / len(wb)
    return 2 * p * r / (p + r)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words: word F1 is 1 for the same words in any order."""
    return _WORD.findall(text.lower())


def facts(text: str) -> list[str]:
    """The factual tokens of a reply: numbers (flights, times, prices, dates) and capitalised
    words that do not start a sentence (names, places). Two replies that say the same thing in
    other words share these; two of the same template with different facts do not, although
    their sentence embeddings and most of their words agree."""
    out, start = [], True
    for tok in _TOKEN.findall(text):
        if tok in ".!?":
            start = True
            continue
        tok = tok.strip(":'")  # "135844:" and "135844" are the same flight; "23:00" keeps its colon
        if not tok:
            continue
        if any(c.isdigit() for c in tok) or (not start and tok[0].isupper() and tok != "I"):
            out.append(tok.lower())
        start = False
    return out
