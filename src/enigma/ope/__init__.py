"""Off-policy evaluation of a dialogue agent with DICE: padding, the objective and trainer,
config and presets, estimates and diagnostics, and the ``EnigmaEstimator``."""

from enigma.ope.config import PRESETS, DiceConfig
from enigma.ope.estimator import EnigmaEstimator, EnigmaResult, TargetActionsError, pair_dialogues
from enigma.ope.padding import PaddingError
from enigma.ope.guards import DiceDivergence
from enigma.ope.problem import DiceData
from enigma.ope.trainer import DiceRun, train_dice

__all__ = [
    "PRESETS", "DiceConfig", "EnigmaEstimator", "EnigmaResult", "TargetActionsError", "pair_dialogues",
    "PaddingError", "DiceData", "DiceDivergence", "DiceRun", "train_dice",
]
