"""A sampling interval for every ENIGMA estimate: the bootstrap over logged dialogues.

What varies from one set of logs to another is which dialogues were logged and, with them, which
target replies were drawn at their states (each logged agent turn carries its own draws). So one
resample draws N dialogues with replacement, with their target replies, and refits DICE on them;
the percentile interval of the refitted estimates is the interval. The features stay those of the
full data (a frozen encoder's vectors and its PCA projection are fixed before DICE), so the
interval covers the estimator given its features, not the choice of features.

Why a refit and not the fitted zeta on resampled dialogues: zeta is a function of the logs, and
holding it fixed leaves out the larger part of the variance (how the ratio itself moves with the
logs). exact_nu makes the refit cheap: each resample starts at the full fit's solution and needs
about 10 Newton steps (airline: 0.45 s a resample on one core), on the resample's distinct
dialogues weighted by their draws (``TurnFeatures.resample``), not on copies of them. With
``dice.interval_refit: kkt`` the refit takes Newton steps on the optimality conditions instead,
zeta's parameters and the multipliers together (``exact_nu.refit_kkt``), to the full fit's
tolerances. Other solvers (gradient descent-ascent) would retrain from scratch per resample, so
they get no interval (``dice.interval_resamples`` needs ``solver: exact_nu``).

The resamples are seeded by ``dice.seed``, so a rerun gives the same interval; every rating's
interval comes from the same resamples, and so does ``paired_difference`` of two targets scored
on the same logs (``resample_indices``).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from enigma import resampling
from enigma.ope.config import ExactNuConfig, IntervalConfig, ObjectiveConfig, ValueConfig
from enigma.ope.estimates import rating_estimates
from enigma.ope.exact_nu import fit_exact_nu, refit_kkt
from enigma.ope.fqe import TurnQ
from enigma.ope.guards import DiceDivergence
from enigma.ope.heads import DiceHeads
from enigma.ope.problem import DiceData
from enigma.ope.turns import TurnFeatures, resample_counts
from enigma.ope.value import value_estimates
from enigma.resampling import bootstrap_indices

log = logging.getLogger(__name__)
# the seed of the resamples is the run's seed plus this, so the resamples are not the draws that
# initialised the heads or the PCA
SEED_OFFSET = 7919


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """[resamples, n] dialogue indices drawn with replacement; the same for every rating and for
    every target scored on the same ``n`` logged dialogues with the same seed."""
    return bootstrap_indices(n, resamples, seed + SEED_OFFSET)


def subset(data: DiceData, idx: np.ndarray) -> DiceData:
    t = torch.as_tensor(idx, dtype=torch.long)
    return DiceData(
        [data.dialog_ids[i] for i in idx], data.n_agent_turns[t], data.sample_mask[t], data.rewards[idx], data.rating_names,
    )


def zeta_last(heads: DiceHeads, turns: TurnFeatures) -> np.ndarray:
    """zeta at each dialogue's last agent turn (slot n): the weights of the estimate."""
    with torch.no_grad():
        return heads.zeta(turns.logged[turns.last()].float()).double().cpu().numpy()


def bootstrap_estimates(
    heads: DiceHeads,
    turns: TurnFeatures,
    data: DiceData,
    *,
    solver: ExactNuConfig,
    objective: ObjectiveConfig,
    interval: IntervalConfig,
    value: ValueConfig,
    seed: int = 0,
    reward_index: int | None = None,
    warm_mu: float | None = None,
    desc: str = "bootstrap",
    progress: bool = False,
    turn_q: TurnQ | None = None,
) -> dict[str, Any]:
    """Refit on ``interval.resamples`` resamples of the dialogues, each from ``heads`` (the full
    fit: its zeta and its multipliers, with the full fit's final penalty weight ``warm_mu``, so a
    resample re-meets the constraints in a few steps instead of tightening them from scratch), until
    every slot mass is within ``interval.tol`` of 1, at most ``interval.steps`` Newton
    steps. A fixed small number of steps (the k-step bootstrap) was tried first: 5 steps matched the
    full refit on airline, but on the tabular problem a resample that lost a rare state-action pair
    was still far from its solution after 5 (slot masses off by 6x) and the interval's tail with it.
    With ``interval.refit: kkt`` each resample is refitted by Newton steps on the optimality
    conditions instead (``refit_kkt``), to the full fit's own tolerances, at most
    ``interval.steps`` steps. ``seed`` draws the resamples; ``value`` says which value each
    resample reports (its Q: a fitted Q evaluation's ``turn_q`` is kept, an LSTD Q refitted).

    Returns ``{"draws": {rating: [B] estimates}, "failed": resamples that diverged (left out),
    "unconverged": resamples stopped by the step limit, "mass_gap_max": the largest
    |E_D[zeta | slot] - 1| a resample ended with, "mean_iterations"}``."""
    idx_all = resample_indices(len(data.dialog_ids), interval.resamples, seed)
    # a looser tolerance than the full fit's: at slot masses within 1e-3 a draw is within 1e-4 of
    # the full refit's (studies/results/interval_refit.md), at half its cost
    refit = solver.model_copy(update={"steps": interval.steps, "constraint_tol": interval.tol,
                                      "solver_tol": 100 * solver.solver_tol})
    gaps: list[float] = []
    iterations: list[int] = []
    unconverged = 0
    draws: dict[str, list[float]] = {n: [] for n in data.rating_names}
    failed = 0
    for idx in tqdm(idx_all, desc=f"{desc} interval", disable=not progress, leave=False):
        # each drawn dialogue once, weighted by its draws: the same sums over about 63% of the rows
        unique, counts = resample_counts(torch.as_tensor(idx))
        sub = subset(data, unique.numpy())
        sub_turns = turns.resample(unique, counts)
        try:
            if interval.refit == "kkt":
                fitted, summary = refit_kkt(copy.deepcopy(heads), sub_turns, sub, solver, objective, reward_index=reward_index,
                                            max_steps=interval.steps)
            else:
                fitted, _, summary = fit_exact_nu(
                    copy.deepcopy(heads), sub_turns, sub, refit, objective, reward_index=reward_index, progress=False, desc=desc,
                    warm_mu=warm_mu, warn=False, log_curve=False,  # the refit's curve is not kept
                )
        except DiceDivergence as exc:
            log.warning("%s: a bootstrap resample diverged (%s); left out of the interval", desc, exc)
            failed += 1
            continue
        gaps.append(summary["mass_gap_max"])
        iterations.append(summary["iterations"])
        unconverged += not summary["converged"]
        if value.kind == "weighted":
            est = {n: e["estimate"] for n, e in rating_estimates(zeta_last(fitted, sub_turns), sub.rewards, sub.rating_names,
                                                                 counts.numpy()).items()}
        else:  # an LSTD Q refitted on the resample too; a fitted Q evaluation's (turn_q) is kept, only its rows resampled
            sub_q = None if turn_q is None else turn_q.select(unique)
            values = value_estimates(fitted, sub_turns, sub, fitted.nu_pad.numel(), value.q_ridge, sub_q,
                                     lstd_residual=value.fqe.lstd_residual, zeta_cap=value.dr_zeta_cap)
            est = {n: v[value.kind] for n, v in values.items()}
        for n in data.rating_names:
            draws[n].append(est[n])
    if unconverged:
        log.warning("%s: %d of %d bootstrap refits stopped at %d Newton steps short of the tolerance (largest slot-mass gap "
                    "%.2g); raise dice.interval_steps or set dice.interval_refit: kkt", desc, unconverged, len(gaps), interval.steps, max(gaps))
    return {"draws": {n: np.asarray(v) for n, v in draws.items()}, "failed": failed, "unconverged": unconverged,
            "mass_gap_max": float(max(gaps)) if gaps else None,
            "mean_iterations": float(np.mean(iterations)) if iterations else None}


def percentile_interval(draws: np.ndarray, level: float) -> list[float] | None:
    """The resamples' percentile interval, or None with fewer than two finite draws."""
    return resampling.percentile_interval(draws, level, min_draws=2)
