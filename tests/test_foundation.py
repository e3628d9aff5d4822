"""The shared contracts and the params loader."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel

from enigma.contracts import Agent, Turn
from enigma.params import ParamsError, load_params, section


def test_offline_environment_is_set_by_the_package():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["DVC_NO_ANALYTICS"] == "1"


def test_turn_rejects_unknown_role():
    assert Turn("user", "hi").role == "user"
    with pytest.raises(ValueError, match="unknown role 'bot'"):
        Turn("bot", "hi")  # type: ignore[arg-type]


def test_agent_protocol_is_structural():
    class Echo:
        def respond(self, history, n=1, seed=None):
            return [history[-1].text] * n

    assert isinstance(Echo(), Agent)
    assert not isinstance(object(), Agent)


class _Cfg(BaseModel):
    lr: float = 0.1
    steps: int


def test_section_reads_validates_and_overrides(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("train:\n  steps: 5\n")
    assert section(_Cfg, "train", p) == _Cfg(steps=5)
    assert section(_Cfg, "train", p, lr=0.5).lr == 0.5
    p.write_text("train:\n  steps: many\n")
    with pytest.raises(ParamsError, match="section 'train'"):
        section(_Cfg, "train", p)


def test_params_errors_name_the_file(tmp_path):
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ParamsError, match="bad.yaml: not valid YAML"):
        load_params(bad)
