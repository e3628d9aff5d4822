"""Typed configuration of the ingest stage (``params.yaml`` section ``ingest``).

Each source declares its rating scales: the raw range, how to map it to [0, 1], and a note
where a higher value is not simply better. Derived ratings (See 2019's ``reward``) are means of
other normalised ratings.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


# Rating names become Parquet column suffixes and SQL identifiers: keep them plain.
RATING_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class RatingScale(BaseModel):
    """One rating's declared scale. ``minmax`` maps [min, max] onto [0, 1]; ``divide`` divides
    by ``divisor`` (the ENIGMA paper divides every See 2019 rating by 4, so a 1-4 rating lands
    in [0.25, 1] and a 0/1 one in [0, 0.25])."""

    model_config = ConfigDict(extra="forbid")

    min: float
    max: float
    normalise: Literal["minmax", "divide"] = "minmax"
    divisor: float | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "RatingScale":
        if not (math.isfinite(self.min) and math.isfinite(self.max)):
            raise ValueError(f"min and max must be finite numbers, got min={self.min:g} max={self.max:g}")
        if self.min >= self.max:
            raise ValueError(f"min must be below max, got min={self.min:g} max={self.max:g}")
        if self.normalise == "divide":
            # nan passed `<= 0` and made every rating nan; inf made every rating 0
            if self.divisor is None or not math.isfinite(self.divisor) or self.divisor <= 0:
                got = "none" if self.divisor is None else f"{self.divisor:g}"
                raise ValueError(f"normalise: divide: the divisor must be a finite number above 0, got {got}")
            if self.min < 0 or self.max > self.divisor:
                raise ValueError(
                    f"divide by {self.divisor} maps [{self.min}, {self.max}] outside [0, 1]"
                )
        elif self.divisor is not None:
            raise ValueError("divisor is only used with normalise: divide")
        return self

    def contains(self, value: float) -> bool:
        return self.min <= value <= self.max

    def normalised(self, value: float) -> float:
        if self.normalise == "divide":
            return value / self.divisor  # type: ignore[operator]
        return (value - self.min) / (self.max - self.min)

    def describe(self) -> str:
        how = f"/ {self.divisor:g}" if self.normalise == "divide" else "min-max"
        return f"{self.min:g}..{self.max:g} ({how})"


class SourceSpec(BaseModel):
    """Rating scales of one source, and derived ratings as means of normalised ones."""

    model_config = ConfigDict(extra="forbid")

    ratings: dict[str, RatingScale] = Field(default_factory=dict)
    derived_mean: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "SourceSpec":
        for name in list(self.ratings) + list(self.derived_mean):
            if not RATING_NAME_RE.match(name):
                raise ValueError(f"rating name {name!r} must match {RATING_NAME_RE.pattern}")
        for name, parts in self.derived_mean.items():
            if name in self.ratings:
                raise ValueError(f"derived rating {name!r} is also a declared rating")
            missing = [p for p in parts if p not in self.ratings]
            if not parts or missing:
                raise ValueError(f"derived rating {name!r} needs declared ratings, missing {missing}")
        return self

    @property
    def rating_names(self) -> list[str]:
        """Column order: declared ratings, then derived ones."""
        return list(self.ratings) + list(self.derived_mean)

    @property
    def raw_names(self) -> list[str]:
        return list(self.ratings)

    def with_scales(self, overrides: dict[str, RatingScale]) -> "SourceSpec":
        ratings = dict(self.ratings)
        ratings.update(overrides)
        return SourceSpec(ratings=ratings, derived_mean=dict(self.derived_mean))


class IngestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Longest utterance accepted. ConvAI2/FED turns are under 1,000 characters; a multi-megabyte
    # "utterance" is a broken export, and would blow up every encoder downstream.
    max_text_chars: int = Field(20_000, ge=1)
    # Agents with fewer rated dialogues are flagged (a warning): their mean rating is too noisy
    # to serve as ground truth, and too little experience to learn from.
    min_dialogues_per_agent: int = Field(20, ge=1)
    # Deepest nesting of containers accepted in one JSON record (the record itself is level 1).
    # A dialogue record needs 3 levels and the See 2019 and FED logs 4; hundreds of levels are
    # a broken or hostile export, and near 1,000 Python's JSON parser gives up.
    max_json_depth: int = Field(32, ge=4, le=500)
    sources: dict[str, SourceSpec] = Field(default_factory=dict)

    def source(self, name: str) -> SourceSpec:
        return self.sources.get(name, SourceSpec())


def parse_scale_option(option: str) -> tuple[str, RatingScale]:
    """``name=min:max`` (min-max normalised) or ``name=min:max/divisor`` from the command line."""
    from pydantic import ValidationError

    name, sep, rng = option.partition("=")
    name = name.strip()
    if not sep or not RATING_NAME_RE.match(name):
        raise ValueError(f"--scale {option!r}: expected NAME=MIN:MAX or NAME=MIN:MAX/DIVISOR")
    rng, slash, div = rng.partition("/")
    lo, colon, hi = rng.partition(":")
    try:
        if not colon:
            raise ValueError
        kwargs: dict = {"min": float(lo), "max": float(hi)}
        if slash:
            kwargs.update(normalise="divide", divisor=float(div))
    except ValueError:
        raise ValueError(f"--scale {option!r}: expected NAME=MIN:MAX or NAME=MIN:MAX/DIVISOR with numbers") from None
    try:
        return name, RatingScale(**kwargs)
    except ValidationError as exc:  # one line: what is wrong with the numbers, not pydantic's report
        why = exc.errors()[0]["msg"].removeprefix("Value error, ").removeprefix("normalise: divide: ")
        raise ValueError(f"--scale {option!r}: {why}") from None


def parse_scale_options(options: list[str]) -> dict[str, RatingScale]:
    """Every ``--scale``; one rating given twice is an error (the last one silently won)."""
    scales: dict[str, RatingScale] = {}
    given: dict[str, str] = {}
    for option in options:
        name, scale = parse_scale_option(option)
        if name in scales:
            raise ValueError(f"--scale: rating {name!r} given twice ({given[name]!r} and {option!r}); give each rating one scale")
        scales[name], given[name] = scale, option
    return scales
