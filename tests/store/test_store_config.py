from __future__ import annotations

import pytest
from pydantic import ValidationError

from enigma.params import Params
from enigma.store.config import IngestConfig, RatingScale, SourceSpec, parse_scale_option


def test_minmax_and_divide_normalisation():
    assert RatingScale(min=1, max=5).normalised(3) == 0.5
    paper = RatingScale(min=1, max=4, normalise="divide", divisor=4)
    assert paper.normalised(1) == 0.25 and paper.normalised(4) == 1.0


@pytest.mark.parametrize("bad", [
    dict(min=2, max=1),
    dict(min=1, max=5, normalise="divide", divisor=4),  # 5/4 > 1
    dict(min=0, max=1, normalise="divide"),
    dict(min=0, max=1, divisor=2),
])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ValidationError):
        RatingScale(**bad)


def test_derived_rating_needs_declared_parts():
    with pytest.raises(ValidationError, match="missing"):
        SourceSpec(ratings={"a": RatingScale(min=0, max=1)}, derived_mean={"r": ["a", "b"]})
    spec = SourceSpec(ratings={"a": RatingScale(min=0, max=1)}, derived_mean={"r": ["a"]})
    assert spec.rating_names == ["a", "r"] and spec.raw_names == ["a"]


def test_parse_scale_option():
    name, s = parse_scale_option("overall=1:5")
    assert name == "overall" and (s.min, s.max, s.normalise) == (1, 5, "minmax")
    name, s = parse_scale_option("enjoy=1:4/4")
    assert s.normalise == "divide" and s.divisor == 4
    for bad in ("overall", "overall=1", "overall=a:b", "bad name=1:2", "x=5:1"):
        with pytest.raises(ValueError, match="--scale"):
            parse_scale_option(bad)


def test_repo_params_declare_see2019_as_in_the_paper():
    cfg = Params.load("params.yaml").ingest
    see = cfg.source("see2019")
    assert len(see.ratings) == 9 and see.derived_mean["reward"] == list(see.ratings)
    assert all(s.normalise == "divide" and s.divisor == 4 for s in see.ratings.values())
    assert "NOT higher-is-better" in see.ratings["inquisitive"].note
    assert isinstance(cfg, IngestConfig)
