"""Named comparators built from the ``comparators`` section of params.yaml.

``build(name, params_path)`` returns one estimator; ``NAMES`` lists them. Each name is also a
factory here taking ``params_path``, so a ``python:enigma.comparators.catalog:<factory>`` spec
works wherever the pipeline accepts estimator specs (factory = name with ``-`` as ``_``).
"""

from __future__ import annotations

from typing import Callable

from enigma.comparators.adem import AdemEstimator, AutoJudgeEstimator
from enigma.comparators.baselines import ExperienceMean, ReplyLength
from enigma.comparators.bertscore import BertScoreEstimator
from enigma.comparators.critic import FqeCriticEstimator
from enigma.comparators.dynaeval import DynaEvalEstimator
from enigma.comparators.config import ComparatorsConfig, load_config
from enigma.comparators.features import FEATURES
from enigma.comparators.handcrafted import DialogueFeatureEstimator
from enigma.comparators.overlap import BleuEstimator, RougeLEstimator
from enigma.comparators.perplexity import PerplexityEstimator
from enigma.comparators.spe import SpeRidge, SpeSigmoid
from enigma.contracts import Regime

_REGIMES = {"replies": Regime.REPLIES_AT_LOGGED_STATES, "rollouts": Regime.OWN_ROLLOUTS}

_BUILDERS: dict[str, Callable[[ComparatorsConfig], object]] = {
    "experience-mean": lambda c: ExperienceMean(),
    "bleu": lambda c: BleuEstimator(),
    "rouge-l": lambda c: RougeLEstimator(),
    "bertscore": lambda c: BertScoreEstimator(c),
    "perplexity": lambda c: PerplexityEstimator(c),
    "spe-ridge": lambda c: SpeRidge(Regime.OWN_ROLLOUTS, c),
    "spe-sigmoid": lambda c: SpeSigmoid(Regime.OWN_ROLLOUTS, c),
    "adem": lambda c: AdemEstimator(c),
    "autojudge": lambda c: AutoJudgeEstimator(Regime.OWN_ROLLOUTS, c),
    "fqe-critic": lambda c: FqeCriticEstimator(c),
}
for _short, _regime in _REGIMES.items():
    _BUILDERS[f"reply-length-{_short}"] = lambda c, r=_regime: ReplyLength(r, c.ridge_alpha)
    _BUILDERS[f"dynaeval-{_short}"] = lambda c, r=_regime: DynaEvalEstimator(r, c)
    _BUILDERS[f"see-ridge-{_short}"] = lambda c, r=_regime: DialogueFeatureEstimator(FEATURES, r, c)
    for _f in FEATURES:
        _BUILDERS[f"see-{_f.replace('_', '-')}-{_short}"] = lambda c, r=_regime, f=_f: DialogueFeatureEstimator((f,), r, c)

NAMES: tuple[str, ...] = tuple(_BUILDERS)


def build(name: str, params_path: str = "params.yaml", config: ComparatorsConfig | None = None):
    if name not in _BUILDERS:
        raise ValueError(f"comparator {name!r}: unknown; known: {', '.join(NAMES)}")
    return _BUILDERS[name](config or load_config(params_path))


def _factory(name: str):
    def make(params_path: str = "params.yaml"):
        return build(name, params_path)

    make.__name__ = name.replace("-", "_")
    make.__doc__ = f"The {name!r} comparator, configured from params.yaml."
    return make


for _name in NAMES:
    globals()[_name.replace("-", "_")] = _factory(_name)
