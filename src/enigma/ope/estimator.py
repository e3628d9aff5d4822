"""``EnigmaEstimator``: the ENIGMA estimate of a held-out agent from other agents' logs.

It reads the held-out agent's replies at the logged states (``HeldOutAgent.target_actions``),
pairs them with the experience store's dialogues (``DialogueActions``), encodes them
(``onehot`` / ``frozen`` / ``finetune``), pads every dialogue to ``Tmax`` slots and trains the
DICE heads; the estimate of every rating comes from one run (two-player objectives with
``alpha_r > 0`` train once per rating).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions, PairEncoder
from enigma.encoders.config import EncodeConfig
from enigma.ope.config import DiceConfig, FeaturesConfig, FrozenFeatures, OnehotFeatures, derived_tmax
from enigma.ope.padding import check_tmax
from enigma.ope.problem import DiceData
from enigma.ope.trainer import DiceRun, train_dice
from enigma.store.experience import ExperienceStore

TARGET_COLUMNS = ("dialog_id", "turn_index", "text")
SOURCE_COLUMN = "source_context"  # optional: the conversation a retrieved reply was said in

# Saved results are reused while the settings are unchanged (``fingerprint``), so a code change
# that moves ENIGMA's numbers must bump this, or reports keep the old numbers beside new code.
# tests/ope/test_ope_numerics.py holds the numbers of each version and fails when they move
# without a bump.
NUMERICS = 1


class TargetActionsError(ValueError):
    """The target-actions table does not fit the experience store; the message names the
    dialogue, turn and column."""


@dataclass
class PairedDialogues:
    dialogues: list[DialogueActions]
    rewards: np.ndarray  # [N, R]
    rating_names: list[str]
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> dialog ids


def pair_dialogues(
    experience: ExperienceStore, target_actions: pa.Table, missing: str = "error", source: str = "target actions"
) -> PairedDialogues:
    """Join the experience dialogues with the target's replies at their agent turns.

    A dialogue that opens with the agent gets an empty user utterance in front (encoders see an
    empty user text); ``agent_turns`` index the padded turns. Sample rows with an ``error`` or a
    null text are not replies; an agent turn left with no reply is an error unless ``missing``
    is ``"drop"``, in which case the dialogue is skipped and listed in ``skipped``.
    """
    for col in TARGET_COLUMNS:
        if col not in target_actions.column_names:
            raise TargetActionsError(f"{source}: column '{col}' missing (have {target_actions.column_names})")
    errors = (
        target_actions.column("error").to_pylist() if "error" in target_actions.column_names else [None] * target_actions.num_rows
    )
    # where each reply was said, when the sampler recorded it (a retrieval stand-in's source)
    has_sources = SOURCE_COLUMN in target_actions.column_names
    sources_col = target_actions.column(SOURCE_COLUMN).to_pylist() if has_sources else None
    replies: dict[tuple[str, int], list[str]] = defaultdict(list)
    sources: dict[tuple[str, int], list[str | None]] = defaultdict(list)
    known = set(experience.dialogues.column("dialog_id").to_pylist())
    cols = [target_actions.column(c).to_pylist() for c in TARGET_COLUMNS]
    for row, (did, t, text) in enumerate(zip(*cols)):
        if did not in known:
            continue  # the target table may cover a larger store (e.g. before excluding agents)
        if t is None:
            raise TargetActionsError(f"{source}: row {row + 1} (dialogue {did}): 'turn_index' is null")
        if errors[row] is None and text is not None:
            replies[(did, int(t))].append(text)
            if has_sources:
                sources[(did, int(t))].append(sources_col[row])

    histories = experience.histories()
    for (did, t) in replies:
        turns_of = histories[did]
        if not 0 <= t < len(turns_of) or turns_of[t].role != "agent":
            raise TargetActionsError(
                f"{source}: dialogue {did}, turn_index {t}: not an agent turn of that dialogue in the experience "
                "store (were the replies sampled on another version of the store?)"
            )
    names = experience.rating_names
    ratings = {n: experience.ratings(n) for n in names}
    ids = experience.dialogues.column("dialog_id").to_pylist()
    out, rows = [], []
    skipped: dict[str, list[str]] = defaultdict(list)
    for i, did in enumerate(ids):
        turns = list(histories[did])
        agent_idx = [t for t, turn in enumerate(turns) if turn.role == "agent"]
        if not agent_idx:
            skipped["no agent turn"].append(did)
            continue
        targets = []
        for t in agent_idx:
            r = replies.get((did, t))
            if not r:
                if missing == "drop":
                    break
                raise TargetActionsError(
                    f"{source}: dialogue {did}, turn_index {t}: no usable target reply (every sample missing or "
                    "failed); resample, or set dice.missing_targets: drop"
                )
            targets.append(tuple(r))
        if len(targets) < len(agent_idx):
            skipped["missing target reply"].append(did)
            continue
        shift = 0
        if turns[0].role == "agent":
            turns.insert(0, Turn("user", ""))
            shift = 1
        target_sources = tuple(tuple(sources[(did, t)]) for t in agent_idx) if has_sources else None
        out.append(DialogueActions(did, tuple(turns), tuple(t + shift for t in agent_idx), tuple(targets), target_sources))
        rows.append([np.nan if ratings[n][i] is None else float(ratings[n][i]) for n in names])
    if not out:
        raise TargetActionsError(f"{source}: no dialogue of the experience store has target replies at all its agent turns")
    rewards = np.array(rows, dtype=np.float64).reshape(len(out), len(names))
    return PairedDialogues(out, rewards, names, dict(skipped))


def build_encoder(features: FeaturesConfig, cache_dir: str | Path | None = None, encode: EncodeConfig | None = None,
                  progress: bool = False) -> PairEncoder:
    """The pair encoder ``features.encoder`` names, on its ``encoder_model``, run as the ``encode``
    section says (the frozen blocks and position buckets, the cache's tokens per text, the
    packed sequence's tokens per utterance); ``cache_dir`` overrides ``encode.cache.cache_dir``."""
    encode = encode or EncodeConfig()
    if isinstance(features, OnehotFeatures):
        from enigma.encoders.onehot import OneHotPairEncoder

        return OneHotPairEncoder()
    if isinstance(features, FrozenFeatures):
        from enigma.encoders.frozen import FrozenPairEncoder
        from enigma.encoders.knowledge import load_knowledge

        if cache_dir is not None:
            encode = encode.model_copy(update={"cache": encode.cache.model_copy(update={"cache_dir": str(cache_dir)})})
        f = encode.frozen
        return FrozenPairEncoder(
            encode.embedding_cache(features.encoder_model, progress=progress), position_buckets=f.position_buckets,
            projection_dim=f.projection_dim, blocks=tuple(f.blocks), agreement=features.agreement,
            grounding=features.grounding, reply_measures=features.reply_measures, request=features.request,
            knowledge=load_knowledge(features.knowledge) if features.knowledge else None, target_history=features.target_history,
        )
    from enigma.encoders.finetune import FinetunePairEncoder

    f = encode.finetune
    return FinetunePairEncoder(
        features.encoder_model, max_utterance_tokens=f.max_utterance_tokens,
        gradient_checkpointing=f.gradient_checkpointing, autocast=f.autocast,
        weights_cache_dir=encode.weights_cache_dir,
    )


def encoder_settings(features: FeaturesConfig, encode: EncodeConfig) -> dict[str, Any]:
    """The part of the ``encode`` section that changes what ``features.encoder`` computes."""
    if features.encoder == "frozen":
        from enigma.encoders.text_cache import VECTORS

        # vectors: the cache's recipe (a result from vectors of another recipe is not reused)
        return {"frozen": encode.frozen.model_dump(mode="json"), "max_length": encode.cache.max_length, "vectors": VECTORS}
    if features.encoder == "finetune":
        return {"finetune": encode.finetune.model_dump(mode="json", exclude={"autocast"})}
    return {}


def dice_data(paired: PairedDialogues) -> DiceData:
    n_turns = torch.tensor([d.n_agent_turns for d in paired.dialogues], dtype=torch.long)
    k = int(n_turns.max())
    s = max(len(r) for d in paired.dialogues for r in d.target_replies)
    mask = torch.zeros(len(paired.dialogues), k, s, dtype=torch.bool)
    for i, d in enumerate(paired.dialogues):
        for j, r in enumerate(d.target_replies):
            mask[i, j, : len(r)] = True
    return DiceData([d.dialog_id for d in paired.dialogues], n_turns, mask, paired.rewards, paired.rating_names)


@dataclass
class EnigmaResult:
    """Everything one held-out agent's run produced."""

    agent_id: str
    estimates: dict[str, dict[str, float]]  # rating -> estimate, unnormalised, ess, n
    diagnostics: dict[str, Any]
    curves: dict[str, list[dict[str, Any]]]  # run name ("all" or the rating) -> learning curve
    runs: dict[str, DiceRun] = field(default_factory=dict, repr=False)
    intervals: dict[str, list[float] | None] = field(default_factory=dict)  # rating -> bootstrap [low, high]

    @property
    def converged(self) -> bool | None:
        """Whether every run's solver met its convergence criterion; None where the solver has
        none (gradient descent-ascent without a stopping rule)."""
        flags = [r.solver.get("converged") for r in self.runs.values()]
        if any(f is False for f in flags):
            return False
        return True if flags and all(f is True for f in flags) else None

    def to_estimate(self) -> EstimateResult:
        """The protocol's result: the estimates with their unnormalised values and effective
        sample sizes, the diagnostics, the learning curves in one table (a ``run`` column: "all",
        or the rating of a per-rating run) and the trained heads (one module, or one per run)."""
        import pandas as pd

        frames = [pd.DataFrame(list(rows)).assign(run=str(run)) for run, rows in self.curves.items() if len(rows)]
        heads = {k: r.heads for k, r in self.runs.items() if r.heads is not None}
        module = next(iter(heads.values())) if len(heads) == 1 else torch.nn.ModuleDict(heads) if heads else None
        artifacts: dict[str, Any] = {"heads": module} if module is not None else {}
        draws = {r: d for run_name, run in self.runs.items() for r, d in run.draws.items() if run_name in ("all", r)}
        if draws:
            # the resamples' estimates, so that two targets scored on the same logs (same
            # dialogues, seed and resamples) can be compared paired (enigma.ope.bootstrap)
            cfg = next(iter(self.runs.values())).bootstrap
            artifacts["bootstrap"] = {"n_dialogues": int(self.diagnostics["n_dialogues"]), "seed": int(cfg["seed"]),
                                      "draws": {r: torch.as_tensor(d, dtype=torch.float64) for r, d in draws.items()}}
        return EstimateResult(
            estimates={r: e["estimate"] for r, e in self.estimates.items()},
            unnormalised={r: e["unnormalised"] for r, e in self.estimates.items()},
            ess={r: e["ess"] for r, e in self.estimates.items()},
            intervals={r: tuple(i) for r, i in self.intervals.items() if i is not None},
            diagnostics=self.diagnostics,
            curve=pd.concat(frames, ignore_index=True) if frames else None,
            artifacts=artifacts,
        )


class EnigmaEstimator:
    """Implements ``enigma.contracts.Estimator`` (regime: replies at logged states)."""

    regimes = frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    numerics = NUMERICS

    def __init__(
        self,
        config: DiceConfig | None = None,
        *,
        encoder: PairEncoder | None = None,
        cache_dir: str | Path | None = None,
        encode: EncodeConfig | None = None,
        name: str = "enigma",
        progress: bool = True,
    ):
        self.config = config or DiceConfig.from_section(None)  # ENIGMA as the product runs it
        self.name = name
        self.cache_dir = cache_dir
        self.encode = encode or EncodeConfig()
        self.progress = progress
        self._encoder = encoder

    def fingerprint(self) -> str:
        """What a saved leave-one-agent-out result depends on: every DICE setting, resolved, and
        the encoder settings that change the pair vectors (not where the cache lives). Nothing
        is left out, so a setting added later changes every fingerprint once (its results are
        carried over by a migration, studies/refingerprint.py, or recomputed), never silently.
        The value settings are the ones a run applies (``applied_value``: no clip on one-hot
        features), so a result made while the clip applied there is not reused."""
        applied = self.config.model_copy(update={"value": self.config.applied_value})
        return json.dumps({"dice": applied.model_dump(mode="json"),
                           "encoder": encoder_settings(self.config.features, self.encode)}, sort_keys=True)

    def encoder(self) -> PairEncoder:
        # The encoder (and a frozen encoder's embedding cache) is reused across held-out agents.
        if self._encoder is None:
            self._encoder = build_encoder(self.config.features, self.cache_dir, self.encode, self.progress)
        return self._encoder

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        return self.estimate_full(experience, target).to_estimate()

    def estimate_full(self, experience: ExperienceStore, target: HeldOutAgent) -> EnigmaResult:
        """The whole run: every DICE run (``runs``, with its heads and weights) and its curves."""
        if target.target_actions is None:
            raise TargetActionsError(f"agent {target.agent_id}: ENIGMA needs its replies at the logged states (target_actions)")
        cfg = self.config
        if cfg.torch_threads:
            import torch

            # for the process, not restored after: torch's parallel reductions split work by thread
            # count, so the fitted heads (and an estimate's last bits) changed with it
            torch.set_num_threads(cfg.torch_threads)
        paired = pair_dialogues(experience, target.target_actions, cfg.missing_targets, source=f"target actions of {target.agent_id}")
        n_turns = [d.n_agent_turns for d in paired.dialogues]
        if cfg.tmax is None:
            cfg = cfg.model_copy(update={"tmax": derived_tmax(max(n_turns))})
        check_tmax(n_turns, cfg.tmax, [d.dialog_id for d in paired.dialogues])
        data = dice_data(paired)
        encoder = self.encoder()
        prepared = encoder.prepare(paired.dialogues, max(n_turns))
        runs: dict[str, DiceRun] = {}
        if cfg.objective.alpha_r:
            for j, name in enumerate(paired.rating_names):
                runs[name] = train_dice(encoder, prepared, data, cfg, reward_index=j, progress=self.progress, desc=f"{target.agent_id}/{name}")
            estimates = {n: runs[n].estimates[n] for n in paired.rating_names}
            intervals = {n: runs[n].intervals.get(n) for n in paired.rating_names}
        else:
            runs["all"] = train_dice(encoder, prepared, data, cfg, progress=self.progress, desc=target.agent_id)
            estimates = runs["all"].estimates
            intervals = dict(runs["all"].intervals)
        diagnostics = {name: run.diagnostics() for name, run in runs.items()}
        diagnostics["n_dialogues"] = len(paired.dialogues)
        diagnostics.update(encoder.diagnostics(prepared))
        diagnostics["skipped"] = {k: len(v) for k, v in paired.skipped.items()}
        diagnostics["config"] = cfg.flat()  # the resolved settings in the params section's own (flat) words
        return EnigmaResult(target.agent_id, estimates, diagnostics, {n: r.curve for n, r in runs.items()}, runs, intervals)
