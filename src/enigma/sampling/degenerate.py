"""Replies that are not replies: what an early checkpoint of a language model says.

Early in training a model answers with nothing, or with one token over and over. Such replies
are the agent's behaviour, so ENIGMA scores them as they are and goes on; but whoever reads
tonight's estimate needs to know how much of the sample they were. These checks read the text
alone, so they apply to every agent kind and to a file of replies sampled before, and they know
nothing of any data set's format.

- **empty**: nothing but white space;
- **repeated**: one word ``REPEAT_RUN`` or more times in a row, one character ``CHAR_RUN`` or
  more times in a row, or, in a reply of ``MIN_WORDS_FOR_SHARE`` words or more, fewer than
  ``MIN_DISTINCT_SHARE`` of them distinct.

A failed sample (no text) is not a reply; the sampler reports it as an error.

Beside them, where the agent records it (``hf:``), how many replies were **cut at the length
limit** (``max_new_tokens``): a model that never ends a reply. Such a reply may read well, so it
is counted apart and not in the degenerate share.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable

REPEAT_RUN = 4
CHAR_RUN = 12
MIN_WORDS_FOR_SHARE = 10
MIN_DISTINCT_SHARE = 0.3
_CHAR_RUN_RE = re.compile(r"(\S)\1{%d,}" % (CHAR_RUN - 1))


def flags(text: str) -> tuple[str, ...]:
    """``("empty",)``, ``("repeated",)`` or ``()``."""
    words = text.split()
    if not words:
        return ("empty",)
    run = longest = 1
    for before, word in zip(words, words[1:]):
        run = run + 1 if word == before else 1
        longest = max(longest, run)
    few_distinct = len(words) >= MIN_WORDS_FOR_SHARE and len(set(words)) < MIN_DISTINCT_SHARE * len(words)
    if longest >= REPEAT_RUN or few_distinct or _CHAR_RUN_RE.search(text):
        return ("repeated",)
    return ()


@dataclass(frozen=True)
class DegenerateReplies:
    """How many of an agent's sampled replies were degenerate, by kind."""

    replies: int
    empty: int
    repeated: int
    # cut at the length limit; None where the agent does not record it
    at_token_limit: int | None = None

    @property
    def share(self) -> float:
        return (self.empty + self.repeated) / self.replies if self.replies else 0.0

    def as_dict(self) -> dict[str, float | int]:
        got = {**asdict(self), "share": round(self.share, 4)}
        if self.at_token_limit is None:  # agents that do not record it: the summary as before
            del got["at_token_limit"]
        return got

    @classmethod
    def from_dict(cls, got: dict[str, Any]) -> "DegenerateReplies":
        return cls(got["replies"], got["empty"], got["repeated"], got.get("at_token_limit"))

    def sentence(self) -> str:
        """``12.5% of its 800 sampled replies are degenerate (empty 40, repeated 60); ...; 30 were cut
        at the length limit``; empty if there is nothing to say."""
        parts = []
        if self.empty or self.repeated:
            parts.append(f"{100 * self.share:.1f}% of its {self.replies} sampled replies are degenerate "
                         f"(empty {self.empty}, repeated {self.repeated}); they are scored as they are")
        if self.at_token_limit:
            parts.append(f"{self.at_token_limit} of its {self.replies} sampled replies were cut at the length "
                         "limit (max_new_tokens) before the model ended them")
        return "; ".join(parts)


def count(texts: Iterable[str | None], at_token_limit: Iterable[bool | None] | None = None) -> DegenerateReplies:
    """``texts``: the sampled replies (None: a failed sample, not counted); ``at_token_limit``:
    beside each, whether it was cut at the length limit (None: not recorded)."""
    texts = list(texts)
    cuts = [None] * len(texts) if at_token_limit is None else list(at_token_limit)
    if len(cuts) != len(texts):
        raise ValueError(f"degenerate.count: {len(texts)} replies, {len(cuts)} length-limit flags")
    replies = empty = repeated = cut = 0
    recorded = False
    for text, at_limit in zip(texts, cuts):
        if text is None:
            continue
        replies += 1
        kind = flags(text)
        empty += kind == ("empty",)
        repeated += kind == ("repeated",)
        if at_limit is not None:
            recorded = True
            cut += bool(at_limit)
    return DegenerateReplies(replies, empty, repeated, cut if recorded else None)
