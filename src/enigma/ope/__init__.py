"""Off-policy evaluation of a dialogue agent with DICE: padding, the objective and trainer,
config and presets, estimates and diagnostics, and the ``EnigmaEstimator``.

The names below load on first use (PEP 562): params.yaml's typed root reads the DICE settings'
module, ``enigma.ope.config``, which runs this package on the way, and reading the settings
must not load torch and the trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_WHERE = {
    "PRESETS": "enigma.ope.config", "DiceConfig": "enigma.ope.config",
    "EnigmaEstimator": "enigma.ope.estimator", "EnigmaResult": "enigma.ope.estimator",
    "TargetActionsError": "enigma.ope.estimator", "pair_dialogues": "enigma.ope.estimator",
    "PaddingError": "enigma.ope.padding", "DiceDivergence": "enigma.ope.guards", "DiceData": "enigma.ope.problem",
    "DiceRun": "enigma.ope.trainer", "train_dice": "enigma.ope.trainer",
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    # plain imports, not importlib with a string: tests/test_layers.py reads them (a function's
    # imports count in its cycle check)
    module = _WHERE.get(name)
    if module == "enigma.ope.config":
        from enigma.ope import config as m
    elif module == "enigma.ope.estimator":
        from enigma.ope import estimator as m
    elif module == "enigma.ope.padding":
        from enigma.ope import padding as m
    elif module == "enigma.ope.guards":
        from enigma.ope import guards as m
    elif module == "enigma.ope.problem":
        from enigma.ope import problem as m
    elif module == "enigma.ope.trainer":
        from enigma.ope import trainer as m
    else:
        raise AttributeError(f"module 'enigma.ope' has no attribute {name!r}")
    value = getattr(m, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:  # for type checkers and editors: the names as if imported here
    from enigma.ope.config import DiceConfig
    from enigma.ope.presets import PRESETS
    from enigma.ope.estimator import EnigmaEstimator, EnigmaResult, TargetActionsError, pair_dialogues
    from enigma.ope.guards import DiceDivergence
    from enigma.ope.padding import PaddingError
    from enigma.ope.problem import DiceData
    from enigma.ope.trainer import DiceRun, train_dice
