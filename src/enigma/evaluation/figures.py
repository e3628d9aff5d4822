"""The report's figures (matplotlib, written as PNG files): estimate against truth per rating
(the paper's Figure 4), error against true value (Figure 27), learning curves (Figure 14) and
an overview of every estimator's mean correlation with its interval."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int, size: float = 2.8):
    plt = _plt()
    ncols = min(5, max(n, 1))
    nrows = math.ceil(max(n, 1) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _save(fig, path: Path) -> Path:
    """Write the figure as a 256-colour palette PNG: line plots on white need no more colours,
    and the file is about a third of matplotlib's RGBA one (the committed reports' figures are
    kept in git, whose reports/ has a size budget). No dithering, so lines stay crisp; median
    cut is deterministic, so the same figure gives the same bytes."""
    from PIL import Image  # pillow: a dependency of matplotlib

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    _plt().close(fig)
    buf.seek(0)
    with Image.open(buf) as im:
        palette = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette.save(path, format="PNG", optimize=True)
    return path


def _pairs(summary: dict[str, Any], estimator: str, rating: str) -> tuple[np.ndarray, np.ndarray]:
    t, e = [], []
    for per in summary["agents"].values():
        cell = per.get(rating, {})
        if cell.get(estimator) is not None and cell.get("truth") is not None:
            t.append(cell["truth"])
            e.append(cell[estimator])
    return np.asarray(t, float), np.asarray(e, float)


def regression_figure(summary: dict[str, Any], estimator: str, path: Path) -> Path:
    """Estimate against truth, one panel per rating, with the least-squares line and y = x."""
    ratings = summary["ratings"]
    fig, axes = _grid(len(ratings))
    for ax, r in zip(axes, ratings):
        t, e = _pairs(summary, estimator, r)
        ax.scatter(t, e, s=14, alpha=0.8)
        if len(t) >= 2 and np.ptp(t) > 0:
            slope, icpt = np.polyfit(t, e, 1)
            xs = np.linspace(t.min(), t.max(), 2)
            ax.plot(xs, slope * xs + icpt, color="C3", lw=1)
        if len(t):
            lo, hi = min(t.min(), e.min()), max(t.max(), e.max())
            ax.plot([lo, hi], [lo, hi], color="0.6", lw=0.8, ls="--")
        p = summary["estimators"][estimator][r]["pearson"]
        ax.set_title(f"{r}  r={p:.2f}" if p is not None else f"{r}  r=n/a", fontsize=9)
        ax.set_xlabel("truth", fontsize=8)
        ax.set_ylabel("estimate", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{estimator}: estimate vs truth per agent", fontsize=10)
    return _save(fig, path)


def error_figure(summary: dict[str, Any], estimator: str, path: Path) -> Path:
    """Estimate minus truth against the true value: shrinkage towards the mean shows as a
    falling line, a constant estimate as a slope of -1."""
    ratings = summary["ratings"]
    fig, axes = _grid(len(ratings))
    for ax, r in zip(axes, ratings):
        t, e = _pairs(summary, estimator, r)
        ax.scatter(t, e - t, s=14, alpha=0.8, color="C1")
        ax.axhline(0.0, color="0.6", lw=0.8, ls="--")
        ax.set_title(r, fontsize=9)
        ax.set_xlabel("truth", fontsize=8)
        ax.set_ylabel("estimate - truth", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{estimator}: error vs true value", fontsize=10)
    return _save(fig, path)


def curve_long(curves: pd.DataFrame) -> pd.DataFrame:
    """Learning curves in long form (estimator, agent_id, step, rating, estimate). Accepts that
    form; a wide one with ``step`` and ``estimate_<rating>`` columns (ENIGMA's trainer), where
    a ``run`` column naming a rating keeps only that rating's estimate (one run per rating);
    or a wide one with ``step`` and one numeric column per rating."""
    if {"rating", "estimate", "step"} <= set(curves.columns):
        return curves[["estimator", "agent_id", "step", "rating", "estimate"]]
    if "step" not in curves.columns:
        raise ValueError("learning curves need a 'step' column")
    prefixed = [c for c in curves.columns if c.startswith("estimate_")]
    if prefixed:
        ids = ["estimator", "agent_id", "step"] + (["run"] if "run" in curves.columns else [])
        long = curves.melt(id_vars=ids, value_vars=prefixed, var_name="rating", value_name="estimate")
        long["rating"] = long["rating"].str[len("estimate_") :]
        if "run" in long.columns:
            long = long[(long["run"] == "all") | (long["run"] == long["rating"])]
        return long[["estimator", "agent_id", "step", "rating", "estimate"]]
    value_cols = [c for c in curves.columns if c not in ("estimator", "agent_id", "step")]
    value_cols = [c for c in value_cols if pd.api.types.is_numeric_dtype(curves[c])]
    return curves.melt(
        id_vars=["estimator", "agent_id", "step"], value_vars=value_cols, var_name="rating", value_name="estimate"
    )


def learning_curve_figure(summary: dict[str, Any], curves: pd.DataFrame, estimator: str, path: Path) -> Path | None:
    """The running estimate over training steps, one line per held-out agent, one panel per
    rating; dotted lines at each agent's true value."""
    long = curve_long(curves)
    long = long[long["estimator"] == estimator]
    ratings = [r for r in summary["ratings"] if r in set(long["rating"])]
    if long.empty or not ratings:
        return None
    fig, axes = _grid(len(ratings), size=3.2)
    agents = sorted(set(long["agent_id"]))
    for ax, r in zip(axes, ratings):
        sub = long[long["rating"] == r]
        for k, a in enumerate(agents):
            c = sub[sub["agent_id"] == a].sort_values("step")
            if c.empty:
                continue
            color = f"C{k % 10}"
            ax.plot(c["step"], c["estimate"], lw=0.8, color=color)
            truth = summary["agents"].get(a, {}).get(r, {}).get("truth")
            if truth is not None:
                ax.axhline(truth, lw=0.6, ls=":", color=color)
        ax.set_title(r, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("estimate", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{estimator}: learning curves (dotted: truth)", fontsize=10)
    return _save(fig, path)


def overview_figure(summary: dict[str, Any], order: list[str], path: Path) -> Path:
    """Mean Pearson and Spearman over ratings per estimator, with bootstrap intervals."""
    plt = _plt()
    n = len(order)
    fig, ax = plt.subplots(figsize=(7, 0.35 * n + 1.2))
    y = np.arange(n)
    for off, stat, color in ((-0.18, "pearson", "C0"), (0.18, "spearman", "C2")):
        vals, lo, hi = [], [], []
        for name in order:
            est = summary["estimators"][name]
            v = est.get(f"mean_{stat}")
            ci = est.get(f"mean_{stat}_ci95") or [None, None]
            vals.append(np.nan if v is None else v)
            lo.append(np.nan if ci[0] is None else ci[0])
            hi.append(np.nan if ci[1] is None else ci[1])
        # The interval as a segment and the estimate as a dot, drawn apart: a percentile interval
        # need not contain the estimate (with few agents the mean of per-rating correlations can
        # fall outside it), which errorbar's non-negative lengths cannot draw.
        ax.hlines(y + off, lo, hi, color=color, lw=1)
        ax.plot(vals, y + off, "o", color=color, ms=4, label=f"mean {stat}")
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(order, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"{summary['benchmark']}: correlation with truth over {summary['n_agents']} agents", fontsize=10)
    return _save(fig, path)
