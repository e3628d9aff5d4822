"""studies/dev_rows.py: the tag names the result file, so a tag without the set's name, under
which another set's rows would overwrite these, is refused before anything runs."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import REPO_ROOT


def test_a_tag_without_the_sets_name_is_refused(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "studies"))  # as `python studies/dev_rows.py` runs it
    dev_rows = importlib.import_module("dev_rows")
    monkeypatch.setattr(sys, "argv", ["dev_rows.py", "airline-delay3", "--tag", "attention_fast", "--row", "default={}"])
    with pytest.raises(SystemExit) as exc:
        dev_rows.main()
    assert exc.value.code == 2
    assert "--tag attention_fast: name the set in it (e.g. dev_rows_airline_delay3_<study>)" in capsys.readouterr().err
