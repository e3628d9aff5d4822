"""What counts as a degenerate reply (``enigma.sampling.degenerate``): the text alone decides."""

from __future__ import annotations

import pytest

from enigma.sampling.degenerate import count, flags


@pytest.mark.parametrize("text, want", [
    ("", ("empty",)), ("   \n", ("empty",)),
    ("ok ok ok ok", ("repeated",)), ("the the the the flight", ("repeated",)),
    ("aaaaaaaaaaaa", ("repeated",)), ("!!!!!!!!!!!!!!!", ("repeated",)),
    ("a b a b a b a b a b a b", ("repeated",)),  # 12 words, 2 distinct
    ("ok ok ok", ()), ("no no no, not that one", ()), ("Sure. Your flight to Boston is booked.", ()),
    ("...", ()), ("I would like to book a flight from Boston to Denver on the third of May", ()),
])
def test_flags(text, want):
    assert flags(text) == want


def test_count_leaves_failed_samples_out():
    c = count(["", "ok ok ok ok", "fine thanks", None, "good"])
    assert (c.replies, c.empty, c.repeated) == (4, 1, 1) and c.share == 0.5
    assert c.sentence().startswith("50.0% of its 4 sampled replies are degenerate (empty 1, repeated 1)")
    assert count(["fine"]).sentence() == "" and count([]).share == 0.0
