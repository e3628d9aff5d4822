"""The estimator registry: every estimator by the name the benchmarks and the nightly job use.

- ENIGMA and its variants: the entries of ``params.estimators`` (``enigma``, ``enigma-gda``,
  ``enigma-random-encoder``, ...), each a DICE configuration.
- The comparators from the literature: ``COMPARATORS`` below, configured by ``params.comparators``.
- Anything else: ``python:<module>:<factory>``; the factory is called with ``params`` (the
  ``Params`` object) if it takes that argument, else with none.

Building is cheap: models load on first use, so a registry lookup can also answer "which
information regime does this estimator need".
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from enigma.comparators.adem import AdemEstimator, AutoJudgeEstimator
from enigma.comparators.baselines import ExperienceMean, ReplyLength
from enigma.comparators.bertscore import BertScoreEstimator
from enigma.comparators.config import ComparatorsConfig
from enigma.comparators.critic import FqeCriticEstimator
from enigma.comparators.dynaeval import DynaEvalEstimator
from enigma.comparators.features import FEATURES
from enigma.comparators.handcrafted import DialogueFeatureEstimator
from enigma.comparators.overlap import BleuEstimator, RougeLEstimator
from enigma.comparators.perplexity import PerplexityEstimator
from enigma.comparators.spe import SpeRidge, SpeSigmoid
from enigma import python_spec
from enigma.contracts import Estimator, Regime
from enigma.ope.config import DiceConfig
from enigma.params import Params, ParamsError
from enigma.pipeline.config import Benchmark

_REGIMES = {"replies": Regime.REPLIES_AT_LOGGED_STATES, "rollouts": Regime.OWN_ROLLOUTS}

COMPARATORS: dict[str, Callable[[ComparatorsConfig], Any]] = {
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
    COMPARATORS[f"reply-length-{_short}"] = lambda c, r=_regime: ReplyLength(r, c.ridge_alpha)
    COMPARATORS[f"dynaeval-{_short}"] = lambda c, r=_regime: DynaEvalEstimator(r, c)
    COMPARATORS[f"see-ridge-{_short}"] = lambda c, r=_regime: DialogueFeatureEstimator(FEATURES, r, c)
    for _f in FEATURES:
        COMPARATORS[f"see-{_f.replace('_', '-')}-{_short}"] = lambda c, r=_regime, f=_f: DialogueFeatureEstimator((f,), r, c)


def names(params: Params) -> list[str]:
    """Every registered name: ENIGMA's entries, then the comparators."""
    return list(params.estimators) + list(COMPARATORS)


def dice_config(name: str, params: Params, knowledge: str | None = None) -> DiceConfig:
    """The DICE configuration of ENIGMA entry ``name``: its base's ``dice`` settings (and the
    base's base's), overridden key by key by its own. ``knowledge`` is the knowledge base of the
    data it runs on (``benchmarks.<b>.knowledge``): it applies where no entry of the chain sets
    ``knowledge`` itself, so ``knowledge: null`` keeps a studied setting as it was studied."""
    chain = []
    entry = params.estimators[name]
    while True:
        chain.append(entry.dice)
        if entry.base is None:
            break
        entry = params.estimators[entry.base]
    section: dict[str, Any] = {}
    for dice in reversed(chain):
        section.update(dice)
    inherited = knowledge is not None and "knowledge" not in section
    if inherited:
        section["knowledge"] = knowledge
    try:
        return DiceConfig.from_section(section)
    except ValueError as exc:
        where = f" (knowledge {knowledge!r} is the benchmark's; knowledge: null in the entry runs it without)" if inherited else ""
        raise ParamsError(f"estimators.{name}.dice: {exc}{where}") from exc


def enigma(name: str, params: Params, *, knowledge: str | None = None, progress: bool = False):
    """ENIGMA entry ``name`` of ``params.estimators`` (``knowledge``: as in ``dice_config``); its
    frozen encoder's vectors are cached where the encode stage keeps them, so a study re-encodes
    nothing."""
    from enigma.ope.estimator import EnigmaEstimator

    cfg = dice_config(name, params, knowledge)
    if params.estimators[name].random_encoder:
        if cfg.features.encoder == "onehot":
            raise ParamsError(f"estimators.{name}: random_encoder needs a text encoder (dice.encoder frozen or finetune), not onehot")
        # the same architecture with random weights, in an embedding-cache namespace of its own
        # (enigma.encoders.weights: random:<base>:<seed>)
        cfg = cfg.with_flat(encoder_model=f"random:{cfg.features.encoder_model}:{cfg.seed}")
    return EnigmaEstimator(cfg, encode=params.encode, name=name, progress=progress)


def build_estimator(name: str, params: Params, *, knowledge: str | None = None, progress: bool = False) -> Estimator:
    """The estimator registered under ``name`` (see the module docstring). ``knowledge``: the
    knowledge base of the data it runs on, for ENIGMA's entries (``dice_config``); the
    comparators read no knowledge base."""
    if name in params.estimators:
        return enigma(name, params, knowledge=knowledge, progress=progress)
    if name in COMPARATORS:
        return COMPARATORS[name](params.comparators)
    if not name.startswith("python:"):
        raise ValueError(
            f"estimator {name!r}: unknown; use an entry of params estimators ({', '.join(params.estimators)}), "
            f"a comparator ({', '.join(COMPARATORS)}) or 'python:<module>:<factory>'"
        )
    where = f"estimator {name!r}"
    factory, dotted = python_spec.load_factory(name, where)
    try:
        takes_params = "params" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_params = False
    return python_spec.call_factory(factory, dotted, where, **({"params": params} if takes_params else {}))


def benchmark_estimator(b: Benchmark, name: str, params: Params, *, progress: bool = False) -> Estimator:
    """Estimator ``name`` as benchmark ``b`` runs it: its ENIGMA entries read the benchmark's
    knowledge base (``dice_config``). Every caller that runs an estimator on a benchmark goes
    through here, so none can forget the base and measure another estimator than the reports'.
    (It was a method of ``Benchmark``; the registry lives above params.yaml's sections, so a
    section's class calling into it made an import cycle.)"""
    return build_estimator(name, params, knowledge=b.config.knowledge, progress=progress)


def uses_embedding_cache(est: Estimator, params: Params) -> bool:
    """Whether an estimator looks texts up in the shared embedding cache (a comparator with a
    text embedder, or ENIGMA's frozen encoder on the encode stage's model), so that the train
    stage encodes every text once before its workers start."""
    from enigma.ope.estimator import EnigmaEstimator

    if isinstance(est, EnigmaEstimator):
        return est.config.frozen is not None and est.config.frozen.encoder_model == params.encode.model
    return getattr(est, "embedder", None) is not None
