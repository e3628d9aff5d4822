"""The evaluation stage's user-facing error."""

from __future__ import annotations


class EvaluationError(ValueError):
    """A results, truth or summary file is missing or malformed; the message names the file,
    the row or record, and the field."""
