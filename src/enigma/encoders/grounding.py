"""The grounding block of the frozen encoder (``dice.grounding``): how much of what a reply
asserts, its names and its numbers, the dialogue had not mentioned before it
(``grounding_features``, on the words the dialogue has said so far: ``Mentioned``)."""

from __future__ import annotations

import functools
import re

from enigma.encoders.text_tokens import facts, words

# per reply, for its names (capitalised words) and its numbers apart: the share the dialogue had
# not mentioned before it, and whether it states any
GROUNDING_MEASURES = ("names_new", "numbers_new", "states_names", "states_numbers")
GROUNDING_DIM = len(GROUNDING_MEASURES)
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")


def _fact_key(token: str) -> str:
    """'$290' and '290', '20th' and '20' are the same fact."""
    token = token.lower().lstrip("$")
    m = _ORDINAL.fullmatch(token)
    return m.group(1) if m else token


@functools.lru_cache(maxsize=1 << 16)
def _vocabulary(text: str) -> frozenset[str]:
    return frozenset({_fact_key(w) for w in words(text)} | {_fact_key(f) for f in facts(text)})


@functools.lru_cache(maxsize=1 << 16)
def fact_keys(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The reply's names and its numbers."""
    keys = {_fact_key(f) for f in facts(text)}
    numbers = frozenset(k for k in keys if any(c.isdigit() for c in k))
    return frozenset(keys - numbers), numbers


class Mentioned:
    """Every word and fact of a dialogue's turns so far. Customers write in lower case as often as
    not, so their words count, not only the capitalised tokens ``facts`` takes from a reply."""

    def __init__(self) -> None:
        self.words: set[str] = set()
        self._seen = 0

    def extend(self, history, role: str | None = None) -> None:
        """Add the turns of ``history`` (the dialogue's turns before a reply) not added yet; with
        ``role``, only that speaker's."""
        for turn in history[self._seen :]:
            if role is None or turn.role == role:
                self.words |= _vocabulary(turn.text)
        self._seen = max(self._seen, len(history))


def grounding_features(reply: str, said: Mentioned) -> list[float]:
    """How much of what ``reply`` asserts the dialogue had not mentioned before it
    (``GROUNDING_MEASURES``). An agent that misheard the user names a city, a date or a name the
    user never said. One that looked a flight up states numbers nobody had said either, and
    names an airline, so which new facts are wrong is left to the model that reads this block
    with the reply's text beside it; names and numbers apart make that easier. Zeros where the
    reply states none."""
    kinds = fact_keys(reply)  # names, numbers
    return [len(f - said.words) / len(f) if f else 0.0 for f in kinds] + [float(bool(f)) for f in kinds]
