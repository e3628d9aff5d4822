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


def test_replies_cut_at_the_length_limit_are_counted_apart():
    """A cut reply may read well: it is counted beside the degenerate share, not in it; an agent
    that does not record it (None) keeps the summary it had."""
    c = count(["a fine reply", "ok ok ok ok", None, "another"], [True, True, None, False])
    assert (c.replies, c.repeated, c.at_token_limit) == (3, 1, 2) and c.share == 1 / 3
    assert c.as_dict()["at_token_limit"] == 2
    assert c.sentence().endswith("; 2 of its 3 sampled replies were cut at the length limit (max_new_tokens) "
                                 "before the model ended them")
    assert count(["fine", "good"], [True, False]).sentence() == (
        "1 of its 2 sampled replies were cut at the length limit (max_new_tokens) before the model ended them")
    assert "at_token_limit" not in count(["fine"]).as_dict() and count(["fine"], [None]).at_token_limit is None
    assert type(c).from_dict(c.as_dict()) == c
    with pytest.raises(ValueError, match="2 replies, 1 length-limit flags"):
        count(["a", "b"], [True])
