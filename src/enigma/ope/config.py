"""The typed configuration of the DICE estimator.

Every constant of the objective and the optimiser lives here, in the named presets
(``enigma.ope.presets``) and in the ``dice`` section of ``params.yaml``. A preset is a named set
of values; the params section picks one with ``preset:`` and may override any key. The section is flat; ``DiceConfig`` is composed of one part
per module, and each module is handed only its part (issue 59, item 3):

- ``objective`` (``ObjectiveConfig``): the regularised Lagrangian both solvers optimise, with
  ``lambda_per_slot`` (the constraints are part of the Lagrangian, whichever solver meets them).
- ``solver``: ``ExactNuConfig`` or ``GdaConfig``, tagged by the flat key ``solver``. Each holds
  only its own settings; a key of the other solver is an error that names it and the solver.
  ``steps``, ``log_every`` and the divergence guards (``zeta_collapse``, ``zeta_explode``) are on
  both, since both apply them as they go. ``head_hidden``, ``slot_normalise``, ``batch_size`` and
  ``average_last`` are gda's; exact_nu fixes them by construction (0, false, null, 0), answers
  them as read-only properties, and a section may name them with exact_nu at those values only,
  so that a gda row built on an exact_nu row (params.yaml's ``enigma-gda`` on ``enigma``) and a
  section written before the split still resolve.
- ``features``: ``FrozenFeatures``, ``FinetuneFeatures`` or ``OnehotFeatures``, tagged by
  ``encoder``. What is computed once from fixed vectors (the frozen encoder's blocks,
  ``target_history``, ``knowledge``, the PCA and its ``pca`` method, random features, turn
  interactions) exists on the frozen features only: set for finetune it is an error, and onehot
  (exact by construction) drops it, as it always turned it off. ``pca`` also finds the fqe Q's
  own projection (``fqe.project_dim``), which is of the same frozen vectors.
- ``value`` (``ValueConfig``): which value is reported (the flat key ``value`` is its ``kind``),
  the Q behind it (``q_ridge``, ``q_model``, the nested ``fqe``), its slot-balance guard
  ``dr_slot_tol`` and the clip of the zeta that weights it, ``dr_zeta_cap``.
- ``interval`` (``IntervalConfig``, flat keys ``interval_<field>``): the bootstrap. A part of its
  own rather than exact_nu's: its settings keep their values on a gda row that inherits them, and
  ``interval_resamples > 0`` with gda is the error it always was.
- On ``DiceConfig`` itself, the run's settings: ``tmax``, ``seed``, ``device``, ``torch_threads``,
  ``missing_targets`` and ``eval_batch_size`` (both the features' pass and the diagnostics' use it).

``DiceConfig.flat()`` gives the resolved settings back as a flat section (what a run records in
its diagnostics); the fingerprint digests the nested ``model_dump`` whole.
"""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from enigma.encoders.config import KNOWLEDGE_SPEC
from enigma.ope.presets import PRESETS


class FqeConfig(BaseModel):
    """The fitted Q evaluation behind ``q_model: fqe`` (enigma/ope/fqe.py): the fqe-critic
    comparator's network and schedule (params.yaml ``comparators.critic``)."""

    model_config = ConfigDict(extra="forbid")

    hidden: int = Field(128, ge=1)
    dropout: float = Field(0.2, ge=0, lt=1)
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-3, gt=0)
    tau: float = Field(0.01, gt=0, le=1, description="Polyak step of the slow copy that gives the Bellman targets")
    agreement: bool = Field(False, description="the Q reads the agreement block too (false: the pair's text features only; true lost 0.37 on See 2019)")
    pessimism_passes: int = Field(0, ge=0, description="Bellman targets: the min over this many dropout passes (the comparator's 5); 0 = the mean network")
    position: bool = Field(False, description="the Q reads the turn's index in its dialogue too (the pair's features describe one turn, not how far the dialogue has gone)")
    ensemble: int = Field(1, ge=1, description="fit this many Qs from consecutive seeds and use their mean (less of the SGD's run-to-run noise)")
    standardise: bool = Field(False, description="fit each rating in units of its own spread over the logs (false: raw units, so a rating of small spread, e.g. a 0/1 rating divided by 4, shapes the shared hidden layer little)")
    linear_members: int = Field(0, ge=0, description="how many of the ensemble's members (the last ones) add a linear map of their inputs to the network's output (a skip path, no dropout): a rating that depends on the features about linearly and weakly, e.g. a 0/1 rating divided by 4, is read without the hidden layers having to learn it")
    lstd_residual: bool = Field(False, description="add to the fitted Q a linear Q on nu's basis fitted by LSTD to the fitted Q's own temporal-difference errors (q_ridge): what the network left of a linear signal; refitted on every bootstrap resample, as the LSTD Q is")
    history: bool = Field(False, description="the Q also reads the mean of the logged pairs' features at the dialogue's earlier agent turns (part of the state): what was done before the turn, which the last exchange and the frozen encoder's history summary dilute in a long dialogue")
    history_extremes: bool = Field(False, description="with history: the Q also reads the element-wise max and min of the earlier turns' features, which a long run of closing turns does not dilute as it dilutes their mean")
    history_attention: bool = Field(False, description="with history: the Q also reads an attention-pooled mean of the earlier turns' features, the weights learned per turn from the current pair (query) and each earlier pair (key), so it can read the turn that decided the rating at any distance")
    project_dim: int | None = Field(None, ge=1, description="frozen encoders: the Q reads its own whitened PCA of the pair's text vectors to this many dims (at or above their width: the vectors themselves); null: the heads' text columns")

    @model_validator(mode="after")
    def _members(self) -> "FqeConfig":
        if self.linear_members > self.ensemble:
            raise ValueError(f"fqe.linear_members ({self.linear_members}) is more than fqe.ensemble ({self.ensemble}) members")
        if self.history_extremes and not self.history:
            raise ValueError("fqe.history_extremes is read beside the history's mean: set fqe.history: true too")
        if self.history_attention and not self.history:
            raise ValueError("fqe.history_attention reads the earlier turns: set fqe.history: true too")
        return self


DEFAULT_TMAX = 15  # the ENIGMA authors' default number of slots


def derived_tmax(longest_agent_turns: int) -> int:
    """dice.tmax when it is not set: room for the longest dialogue and a pseudo slot after it."""
    return max(DEFAULT_TMAX, longest_agent_turns + 2)


class ObjectiveConfig(BaseModel):
    """The regularised Lagrangian both solvers optimise (enigma/ope/objective.py, exact_nu.py)."""

    model_config = ConfigDict(extra="forbid")

    alpha_zeta: float = Field(1.0, ge=0, description="weight of the zeta penalty f (dual regulariser)")
    zeta_penalty: Literal["square", "half_square"] = "square"  # f(x)=x^2 (ENIGMA) or x^2/2 (dice_rl)
    alpha_nu: float = Field(0.0, ge=0, description="weight of f(nu) (primal regulariser; GenDICE)")
    alpha_r: float = Field(0.0, ge=0, description="weight of zeta_T * r; >0 trains once per rating")
    normalise: bool = True  # the lambda (E_D[zeta] = 1) constraint
    lambda_per_slot: bool = False  # one lambda per slot position: every slot group has 1/Tmax mass
    zeta_activation: Literal["square", "shifted_square", "softplus", "none"] = "square"


class _SolverBase(BaseModel):
    """What both solvers have: how long they run, how often they log, and the divergence guards
    (enigma/ope/guards.py), which both apply to E_D[zeta] as they go."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(3000, ge=1)
    log_every: int = Field(100, ge=1)
    zeta_collapse: float = Field(1e-3, gt=0, description="E_D[zeta] below this stops the run")
    zeta_explode: float = Field(1e3, gt=0, description="E_D[zeta] above this stops the run")

    @model_validator(mode="after")
    def _guards(self):
        if self.zeta_collapse >= self.zeta_explode:
            raise ValueError("zeta_collapse must be below zeta_explode")
        return self


class GdaConfig(_SolverBase):
    """Gradient descent-ascent on every player (any encoder, the paper's way; enigma/ope/gda.py):
    its optimiser, schedule, batches, weight averaging, stopping rule and the heads' width."""

    name: Literal["gda"] = "gda"
    head_hidden: int = Field(64, ge=0, description="hidden width of the GELU MLP heads; 0 = linear")
    slot_normalise: bool = False  # divide zeta by its mean per slot position (E_D[zeta|slot] = 1 exactly)

    optimizer: Literal["adamw", "sgd"] = "adamw"
    optimistic: bool = False  # feed 2 g_t - g_{t-1} to the optimiser (optimistic GDA)
    lr: float = Field(1e-3, gt=0)
    lr_scale_zeta: float = Field(1.0, gt=0)
    lr_scale_nu: float = Field(2.0, gt=0)
    lr_scale_lambda: float = Field(10.0, gt=0)
    lr_scale_encoder: float = Field(1.0, gt=0)
    schedule: Literal["constant", "inverse_sqrt"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    clip_norm: float | None = Field(None, gt=0)

    batch_size: int | None = Field(None, ge=1, description="dialogues per step; None = all")
    average_last: float = Field(0.2, ge=0, lt=1, description="final pass with weights averaged over this tail")

    # stopping rule (0 = off): stable per-slot mass and estimates over a window
    stop_window: int = Field(0, ge=0, description="steps over which the diagnostics must be stable")
    stop_min_steps: int = Field(0, ge=0)
    stop_slot_tol: float = Field(0.03, gt=0, description="every slot's E_D[zeta] within 1 +- this")
    stop_estimate_tol: float = Field(0.002, gt=0, description="no estimate moves more than this")

    @model_validator(mode="after")
    def _warmup(self) -> "GdaConfig":
        if self.warmup_steps >= self.steps and self.schedule == "inverse_sqrt":
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be below steps ({self.steps})")
        return self


# What the exact_nu solver fixes by construction, each with why: a flat dice section may name them
# only at these values (a section inherited by a gda row, or written before the split, still
# resolves), and ExactNuConfig answers them as read-only properties.
EXACT_NU_FIXED: dict[str, tuple[Any, str]] = {
    "head_hidden": (0, "nu linear in the features"),
    "slot_normalise": (False, "it meets the slot constraints through lambda itself"),
    "batch_size": (None, "it uses every dialogue at each iteration"),
    "average_last": (0.0, "its solution is a minimiser, not the tail of a trajectory"),
}


class ExactNuConfig(_SolverBase):
    """nu (linear in fixed features, alpha_nu > 0) solved in closed form at every zeta, F(zeta)
    minimised by Newton steps under the lambda constraints (method of multipliers) to a gradient
    and a constraint tolerance (enigma/ope/exact_nu.py)."""

    name: Literal["exact_nu"] = "exact_nu"
    solver_tol: float = Field(1e-6, gt=0, description="inner problems solved when every |d(4 alpha_nu A)/dparam| is below this")
    constraint_tol: float = Field(1e-6, gt=0, description="converged when every E_D[zeta | slot] is within 1 +- this")

    # EXACT_NU_FIXED, read where either solver's heads or passes are built
    @property
    def head_hidden(self) -> int:
        return 0

    @property
    def slot_normalise(self) -> bool:
        return False

    @property
    def batch_size(self) -> None:
        return None

    @property
    def average_last(self) -> float:
        return 0.0


SolverConfig = Annotated[Union[GdaConfig, ExactNuConfig], Field(discriminator="name")]


class OnehotFeatures(BaseModel):
    """One coordinate per state-action pair: exact by construction, so none of the text features'
    settings apply (a flat section's are dropped, as ENIGMA's own project_dim and blocks are)."""

    model_config = ConfigDict(extra="forbid")
    encoder: Literal["onehot"] = "onehot"


class FinetuneFeatures(BaseModel):
    """A sentence encoder trained with the heads: features change every step, so nothing computed
    once from fixed features (PCA, blocks, random features) exists here."""

    model_config = ConfigDict(extra="forbid")
    encoder: Literal["finetune"] = "finetune"
    encoder_model: str = "minilm"  # a packaged name or a local HF directory


class FrozenFeatures(BaseModel):
    """The cached sentence vectors of the pair, the frozen encoder's blocks appended, then what is
    computed once from the fixed features for the heads (PCA, random features, turn interactions)."""

    model_config = ConfigDict(extra="forbid")
    encoder: Literal["frozen"] = "frozen"
    encoder_model: str = "minilm"  # a packaged name or a local HF directory
    # append how far each logged dialogue has followed the target so far (cosine and word
    # F1 of logged vs target replies, this turn and the earlier ones); see encoders/frozen.py
    agreement: bool = False
    # append whether the pair's reply states facts (numbers, names) the dialogue had not
    # mentioned before it; the heads and the fqe Q read it (encoders/frozen.py, grounding_features)
    grounding: bool = False
    # append what each pair's reply does in See et al.'s (2019) terms: the share of its
    # bigrams repeating the agent's earlier turns, itself and the user's last turn, whether it
    # asks, its log length; the heads and the fqe Q read it (enigma/reply_measures.py)
    reply_measures: bool = False
    # append how close each pair's reply is to the user's opening request (cosine and word
    # F1 with the first user turn); the heads and the fqe Q read it (encoders/frozen.py, request_features)
    request: bool = False
    # append what the facts a reply looks up say against the user's words (whether it
    # names what the knowledge base holds, the share of those facts the user never said, whether
    # the base contradicts it; and, where the base reads them, whether its action answers the
    # user's request and whether the base searched with the user's words refutes it), from
    # 'python:<module>:<factory>' (encoders/knowledge.py knowledge_measures); null: none
    knowledge: str | None = Field(None, pattern=KNOWLEDGE_SPEC)
    # whose earlier turns a target reply follows in its pair's features (the state's
    # prev_agent block and the reply measures): for a reply retrieved by a stand-in that records
    # its sources, the conversation it was said in, and for any other reply the logged dialogue
    # (source, the default: without sources it is the logged dialogue exactly); the logged
    # dialogue's always (logged); or the target's own replies at
    # the dialogue's earlier agent turns (own). Measured: studies/docs/estimator-history.md
    target_history: Literal["logged", "own", "source"] = "source"
    project_dim: int | None = Field(None, ge=1, description="fixed whitened PCA to this many dims before the heads")
    pca: Literal["randomized", "exact"] = Field("randomized", description="how project_dim's (and fqe.project_dim's) PCA is found: "
                                                "randomized (torch.pca_lowrank, seeded, on the CPU whatever the device) or exact (eigenvectors of the scatter matrix)")
    # capacity for linear heads (exact_nu): random Fourier features of the (projected) text and
    # agreement features, appended to them, so the heads read a Gaussian kernel's approximation
    random_features: int = Field(0, ge=0, description="this many random Fourier features appended; 0 = none")
    random_features_scale: float = Field(1.0, gt=0, description="the kernel's bandwidth, in units of sqrt(input dims) of standardised inputs")
    # the ratio d^pi/d^D compounds turn by turn, so a feature that matters little at the first
    # turn may matter much at the tenth; a linear head shared by every turn cannot say so
    turn_interactions: bool = Field(False, description="append the features times the turn's position t/(Tmax-1), and the position")


FeaturesConfig = Annotated[Union[FrozenFeatures, FinetuneFeatures, OnehotFeatures], Field(discriminator="encoder")]


class ValueConfig(BaseModel):
    """Which value is reported (enigma/ope/value.py): the zeta-weighted reward (the paper's), a Q
    function fitted alone, or the two combined, doubly robust. All three are computed for every
    run on fixed features (linear heads or not) and kept in the diagnostics."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["weighted", "q", "dr"] = "weighted"  # the flat section's ``value``
    q_ridge: float = Field(1e-6, ge=0, description="Tikhonov weight on the Q fit's coefficients, relative to E[psi^2]")
    # the Q of the q and dr values: lstd (linear, nu's basis, q_ridge) or fqe (an MLP fitted by
    # fitted Q evaluation on the same features, enigma/ope/fqe.py; kept fixed across bootstrap resamples)
    q_model: Literal["lstd", "fqe"] = "lstd"
    fqe: FqeConfig = Field(default_factory=FqeConfig)
    # the dr value is a ratio of zeta-weighted sums whose denominator is the slot-0 mass: right
    # only where zeta meets the slot constraints up to a common scale (exact_nu does, to
    # constraint_tol; gradient descent-ascent stopped early does not, and a slot-0 mass near 0
    # beside the others blows the value up: studies/docs/estimator-history.md, nonlinear heads)
    dr_slot_tol: float = Field(0.1, gt=0, description="value dr: a run whose E_D[zeta | slot], over their mean, is outside 1 +- this for some slot is flagged not converged")
    # the dr value's correction is zeta-weighted, and a few dialogues with a large zeta carry it
    # (zeta's effective sample: a median 10% of the logs over the reports' 205 runs, 3 to 38%):
    # clipping zeta trades the correction's variance for some of its bias, the usual clipped
    # importance weight
    dr_zeta_cap: float | None = Field(None, gt=0, description="value dr: zeta (mean 1 over the logs) clipped at this before it weights the corrected rewards; null: not clipped")


class IntervalConfig(BaseModel):
    """The sampling interval: the bootstrap over logged dialogues, each resample refitted from the
    full exact_nu fit (enigma/ope/bootstrap.py). Flat keys: ``interval_<field>``."""

    model_config = ConfigDict(extra="forbid")

    resamples: int = Field(0, ge=0, description="resamples of the logged dialogues, each refitted; 0 = no interval")
    level: float = Field(0.95, gt=0, lt=1, description="the interval's nominal coverage")
    tol: float = Field(1e-3, gt=0, description="a resample's refit stops once every slot mass is within 1 +- this "
                       "(and every |gradient| below 100 solver_tol)")
    steps: int = Field(100, ge=1, description="Newton steps per resample at most")
    # how a resample is refitted from the full fit: the solver's own method of multipliers to
    # tol, or Newton steps on the optimality conditions (theta and the multipliers together) to
    # the full fit's solver_tol and constraint_tol: fewer steps, each refit as exact as the fit
    # itself (enigma/ope/exact_nu.py refit_kkt; docs/intervals.md)
    refit: Literal["multipliers", "kkt"] = "multipliers"

    @model_validator(mode="after")
    def _enough(self) -> "IntervalConfig":
        if 0 < self.resamples < 20:
            raise ValueError(f"interval_resamples {self.resamples}: a percentile interval needs at least 20 (or 0: none)")
        return self


# The flat ``dice`` section's keys that name a part's field differently: key -> (part, field),
# and back.
_RENAMED = {"solver": ("solver", "name"), "encoder": ("features", "encoder"), "value": ("value", "kind")}
_RENAMED.update({f"interval_{f}": ("interval", f) for f in IntervalConfig.model_fields})
_FLAT_KEY = {where: key for key, where in _RENAMED.items()}

# A frozen-only feature key a finetune section sets away from its default: why it cannot apply.
_BLOCK = "is a block of the frozen encoder's pair vectors: it needs encoder frozen"
_ONCE = "computed once from fixed features"
_NEEDS_FROZEN = {
    **{key: f"{key} {_BLOCK}" for key in ("grounding", "reply_measures", "request", "knowledge", "agreement")},
    "target_history": "target_history reads the frozen encoder's blocks: it needs encoder frozen",
    "turn_interactions": f"turn_interactions are {_ONCE}: they need encoder frozen",
    "random_features": f"random_features are {_ONCE}: they need encoder frozen",
    "random_features_scale": f"random_features are {_ONCE}: they need encoder frozen",
    "project_dim": f"project_dim is a PCA {_ONCE}: it needs encoder frozen",
    "pca": f"pca is how project_dim's PCA is found, {_ONCE}: it needs encoder frozen",
}


class DiceConfig(BaseModel):
    """The DICE estimator's settings, one part per module (see the module docstring); built from
    the flat params.yaml ``dice`` section by ``from_section``, ``preset`` or the constructor."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # null: derived from the logs at each run, so a data set of longer dialogues needs no setting: the
    # longest dialogue's agent turns + 2 (the authors' code requires turns + 1 < Tmax), and never fewer
    # than DEFAULT_TMAX, their default (with 3 or 4 slots exact_nu's zeta collapsed on a store of 8 chats)
    tmax: int | None = Field(None, ge=2, description="slots per dialogue: pseudo slot 0, agent turns, pseudo slots; null: max(15, the longest dialogue + 2)")
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # CPU threads for torch in the estimate command: the per-step ops are small, and on a busy
    # 2-core machine two threads ran 8x slower than one (studies/results/ope_speed.md)
    torch_threads: int | None = Field(1, ge=1)
    missing_targets: Literal["error", "drop"] = "error"  # an agent turn without target replies
    eval_batch_size: int = Field(512, ge=1, description="dialogues per pass when features or diagnostics are computed")

    objective: ObjectiveConfig = Field(default_factory=ObjectiveConfig)
    solver: SolverConfig = Field(default_factory=GdaConfig)
    features: FeaturesConfig = Field(default_factory=FrozenFeatures)
    value: ValueConfig = Field(default_factory=ValueConfig)
    interval: IntervalConfig = Field(default_factory=IntervalConfig)

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        # the flat section's form (params.yaml, DiceConfig(encoder=..., lr=...)) is routed to the
        # parts; the nested form (a dump of the model itself) is taken as it is
        if isinstance(data, dict) and _is_flat(data):
            return route(data)
        return data

    @model_validator(mode="after")
    def _check(self) -> "DiceConfig":
        if isinstance(self.solver, ExactNuConfig) and not self.objective.alpha_nu > 0:
            raise ValueError("solver exact_nu needs alpha_nu > 0 (without a penalty on nu its minimum is -inf off the flow constraints)")
        if self.value.kind != "weighted" and isinstance(self.features, FinetuneFeatures):
            raise ValueError(f"value {self.value.kind!r} fits its Q once on the turns' features: it needs fixed features (encoder frozen or onehot)")
        if self.interval.resamples and not isinstance(self.solver, ExactNuConfig):
            raise ValueError(
                "interval_resamples > 0 needs solver exact_nu (each resample is refitted from the full fit's "
                "solution in a few Newton steps; gradient descent-ascent would retrain from scratch)"
            )
        return self

    @property
    def frozen(self) -> FrozenFeatures | None:
        """The frozen encoder's feature settings, None for the other encoders."""
        return self.features if isinstance(self.features, FrozenFeatures) else None

    @property
    def applied_value(self) -> ValueConfig:
        """The value settings as a run applies them. The clip of dr's zeta (``dr_zeta_cap``) tames
        a ratio fitted on features that cannot represent it; on one-hot features the heads are
        tables, zeta is the logs' empirical ratio and the unclipped dr their saddle point, which
        a clip would only move (the tabular problem: up to 0.016): there it is not applied."""
        if isinstance(self.features, OnehotFeatures) and self.value.dr_zeta_cap is not None:
            return self.value.model_copy(update={"dr_zeta_cap": None})
        return self.value

    @property
    def q_project_dim(self) -> int | None:
        """The fqe Q's own PCA width (frozen features with q_model fqe only), else None."""
        return self.value.fqe.project_dim if self.value.q_model == "fqe" and self.frozen is not None else None

    def flat(self) -> dict[str, Any]:
        """The resolved settings as a flat ``dice`` section (JSON values): what ``from_flat`` reads
        back to this config, and what a run records in its diagnostics."""
        out: dict[str, Any] = {}
        for name, value in self.model_dump(mode="json").items():
            if name not in _PARTS:
                out[name] = value
                continue
            for field, v in value.items():
                out[_FLAT_KEY.get((name, field), field)] = v
        return out

    def with_flat(self, **overrides: Any) -> "DiceConfig":
        """This config with flat ``dice`` keys changed, validated again."""
        return DiceConfig.from_flat({**self.flat(), **overrides})

    @classmethod
    def from_flat(cls, values: dict[str, Any]) -> "DiceConfig":
        return cls.model_validate(route(values))

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "DiceConfig":
        if name not in PRESETS:
            # the gradient descent-ascent preset was named "default" until issue 59, not the default
            renamed = " (the preset once named 'default' is 'gda', gradient descent-ascent; ENIGMA's default: leave preset out)" if name == "default" else ""
            raise ValueError(f"unknown DICE preset {name!r}; known: {sorted(PRESETS)}{renamed}")
        values = copy.deepcopy(dict(PRESETS[name]))
        values.update(overrides)
        return cls.from_flat(values)

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> "DiceConfig":
        """A params.yaml ``dice`` section: ``preset`` plus overrides. Without ``preset`` the
        section overrides ENIGMA as the product runs it (``ENIGMA_DEFAULT``), so an empty
        section is ENIGMA, not the bare field defaults (gradient descent-ascent)."""
        data = copy.deepcopy(dict(section or {}))
        if "preset" not in data:
            data = {**copy.deepcopy(ENIGMA_DEFAULT), **data}
        name = data.pop("preset")
        return cls.preset(name, **data)


_PARTS = ("objective", "solver", "features", "value", "interval")
_RUN = tuple(k for k in DiceConfig.model_fields if k not in _PARTS)
_SOLVERS = {"gda": GdaConfig, "exact_nu": ExactNuConfig}
_ENCODERS = {"frozen": FrozenFeatures, "finetune": FinetuneFeatures, "onehot": OnehotFeatures}


def _owners() -> dict[str, tuple[str, str]]:
    """Every flat key -> (part, field); a solver's or an encoder's key -> that part, whichever
    solver or encoder owns it (route checks the one chosen has it)."""
    out: dict[str, tuple[str, str]] = {k: ("", k) for k in _RUN}
    parts: dict[str, list[type[BaseModel]]] = {"objective": [ObjectiveConfig], "solver": list(_SOLVERS.values()),
                                               "features": list(_ENCODERS.values()), "value": [ValueConfig], "interval": [IntervalConfig]}
    for part, models in parts.items():
        for model in models:
            for field in model.model_fields:
                out[_FLAT_KEY.get((part, field), field)] = (part, field)
    for key in EXACT_NU_FIXED:
        out[key] = ("solver", key)
    return out


_OWNERS = _owners()


def _is_flat(data: dict[str, Any]) -> bool:
    return any(k not in DiceConfig.model_fields for k in data) or any(
        k in data and not isinstance(data[k], (dict, BaseModel)) for k in _PARTS)


def route(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat ``dice`` mapping (no ``preset``) -> the nested form DiceConfig validates. A key of
    the solver not chosen is an error naming both; a key the exact_nu solver fixes is accepted
    at its fixed value only; the text features' keys are dropped for onehot (exact by
    construction) and, set away from their defaults, an error for finetune."""
    flat = dict(flat)
    solver = flat.get("solver", "gda")
    encoder = flat.get("encoder", "frozen")
    out: dict[str, Any] = {p: {} for p in _PARTS}
    out["solver"]["name"], out["features"]["encoder"] = solver, encoder  # each union's tag, set or not
    for key, value in flat.items():
        if key not in _OWNERS:
            raise ValueError(f"unknown dice setting {key!r}")
        part, field = _OWNERS[key]
        if not part:
            out[key] = value
            continue
        if part == "solver" and key != "solver" and solver in _SOLVERS:
            model = _SOLVERS[solver]
            if key in EXACT_NU_FIXED and model is ExactNuConfig:
                fixed, why = EXACT_NU_FIXED[key]
                if value != fixed:
                    raise ValueError(f"solver exact_nu needs {key}: {json.dumps(fixed)} ({why})")
                continue
            if field not in model.model_fields:
                other = next(n for n, m in _SOLVERS.items() if field in m.model_fields)
                raise ValueError(f"dice.{key} is a setting of solver {other}; solver {solver} has no {key}")
        if part == "features" and key != "encoder" and encoder in _ENCODERS:
            model = _ENCODERS[encoder]
            if field not in model.model_fields:
                if model is OnehotFeatures:
                    continue
                if value != FrozenFeatures.model_fields[field].default:
                    raise ValueError(_NEEDS_FROZEN.get(key, f"{key} needs encoder frozen"))
                continue
        out[part][field] = value
    return out


# ENIGMA as the product runs it (params.yaml's ``estimators.enigma``): what ``EnigmaEstimator()``
# and a ``dice`` section without ``preset`` mean, and the estimators section of a params file
# without one (enigma.params). Not DiceConfig's field defaults, which every preset starts from.
# tests/test_cli_faults.py checks that params.yaml's enigma resolves to it.
ENIGMA_DEFAULT: dict[str, Any] = {
    "preset": "exact_nu", "tmax": None, "encoder": "frozen", "project_dim": 32, "pca": "randomized",
    "alpha_nu": 0.0001, "agreement": True, "reply_measures": True, "grounding": True, "target_history": "source",
    "value": "dr", "dr_slot_tol": 0.1, "dr_zeta_cap": 1.0, "q_ridge": 0.01, "q_model": "fqe",
    "fqe": {"agreement": False, "ensemble": 2, "linear_members": 1, "history": True, "history_extremes": True, "history_attention": True, "epochs": 45},
    "random_features": 0, "steps": 400,
    "log_every": 5, "interval_resamples": 100, "interval_tol": 0.001, "interval_refit": "kkt",
    "missing_targets": "error",
}
