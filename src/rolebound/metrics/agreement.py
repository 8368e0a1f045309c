"""Agreement between two raters (a judge and a human, or two humans), numbers only.

Every statistic is computed from the contingency table of the paired ratings on a fixed grid of
values (the scale's points; 0-5 scores on half points, so the mean of two annotators fits), which
makes a bootstrap of thousands of resamples cheap: a resample is a bincount.

- ordinal scales: Spearman rho and Kendall tau-b (ties handled as scipy does), quadratic-weighted
  Cohen's kappa, exact agreement, mean absolute error;
- nominal scales (yes/no): accuracy (= exact agreement) and Cohen's kappa.

The bootstrap resamples pairs with a fixed seed; callers sort their pairs by a stable key first,
so the same pairs in any order give the same intervals.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

ORDINAL = ("spearman", "kendall", "qwk", "exact", "mae")
NOMINAL = ("accuracy", "kappa")
BOOTSTRAP = 1000
SEED = 0


def table(a: Sequence[int], b: Sequence[int], k: int) -> np.ndarray:
    """k x k counts of the pairs (a[i], b[i]), both already grid indices 0..k-1."""
    codes = np.asarray(a, dtype=np.int64) * k + np.asarray(b, dtype=np.int64)
    return np.bincount(codes, minlength=k * k).reshape(k, k).astype(float)


def _nan_div(num, den):
    """num / den elementwise, NaN where den is 0 (a statistic left undefined)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _midranks(counts: np.ndarray) -> np.ndarray:
    before = np.cumsum(counts, -1) - counts
    return before + (counts + 1) / 2


# Each statistic takes one table (k, k) or a stack of them (..., k, k), so the bootstrap's
# resamples are computed at once.
def spearman(t: np.ndarray) -> float | np.ndarray:
    """Pearson correlation of the midranks, weighted by the table."""
    n = t.sum((-2, -1))
    ra, rb = t.sum(-1), t.sum(-2)
    rx, ry = _midranks(ra), _midranks(rb)
    n_ = np.where(n > 0, n, 1)[..., None]
    dx = rx - (ra * rx).sum(-1, keepdims=True) / n_
    dy = ry - (rb * ry).sum(-1, keepdims=True) / n_
    cov = np.einsum("...ij,...i,...j->...", t, dx, dy)
    den = np.sqrt((ra * dx ** 2).sum(-1) * (rb * dy ** 2).sum(-1))
    return _scalar(np.where(n >= 2, _nan_div(cov, den), np.nan))


def kendall(t: np.ndarray) -> float | np.ndarray:
    """Kendall tau-b from the table: concordant minus discordant pairs over the tie-corrected total."""
    n = t.sum((-2, -1))
    # greater on both (concordant) and greater on a, smaller on b (discordant), per cell
    both = np.flip(np.cumsum(np.cumsum(np.flip(t, (-2, -1)), -2), -1), (-2, -1))
    gt_lt = np.flip(np.cumsum(np.cumsum(np.flip(t, -2), -2), -1), -2)
    conc_w, disc_w = np.zeros_like(t), np.zeros_like(t)
    conc_w[..., :-1, :-1] = both[..., 1:, 1:]
    disc_w[..., :-1, 1:] = gt_lt[..., 1:, :-1]
    conc, disc = (t * conc_w).sum((-2, -1)), (t * disc_w).sum((-2, -1))
    n0 = n * (n - 1) / 2
    ta = (t.sum(-1) * (t.sum(-1) - 1) / 2).sum(-1)
    tb = (t.sum(-2) * (t.sum(-2) - 1) / 2).sum(-1)
    den = np.sqrt(np.clip((n0 - ta) * (n0 - tb), 0, None))
    return _scalar(_nan_div(conc - disc, den))


def kappa(t: np.ndarray, weights: str | None = None) -> float | np.ndarray:
    """Cohen's kappa; weights="quadratic" for the weighted kappa on an ordinal grid."""
    n = t.sum((-2, -1))
    k = t.shape[-1]
    i, j = np.indices((k, k))
    w = ((i - j) ** 2 / (k - 1) ** 2) if weights == "quadratic" else (i != j).astype(float)
    expected = t.sum(-1)[..., :, None] * t.sum(-2)[..., None, :] / np.where(n > 0, n, 1)[..., None, None]
    den = (w * expected).sum((-2, -1))
    return _scalar(1 - _nan_div((w * t).sum((-2, -1)), den))


def exact(t: np.ndarray) -> float | np.ndarray:
    return _scalar(_nan_div(np.trace(t, axis1=-2, axis2=-1), t.sum((-2, -1))))


def mae(t: np.ndarray, values: Sequence[float]) -> float | np.ndarray:
    v = np.asarray(values, dtype=float)
    return _scalar(_nan_div((t * np.abs(v[:, None] - v[None, :])).sum((-2, -1)), t.sum((-2, -1))))


def _scalar(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


def statistics(t: np.ndarray, values: Sequence[float], kind: str) -> dict[str, float | np.ndarray]:
    if kind == "nominal":
        return {"accuracy": exact(t), "kappa": kappa(t)}
    return {"spearman": spearman(t), "kendall": kendall(t), "qwk": kappa(t, "quadratic"),
            "exact": exact(t), "mae": mae(t, values)}


def agreement(a: Sequence[int], b: Sequence[int], values: Sequence[float], kind: str = "ordinal", *,
              resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """{n, <statistic>: {value, lo, hi}} for paired grid indices a, b (in the caller's stable order).
    The interval is the 2.5-97.5 percentile of `resamples` bootstrap resamples of the pairs (None
    when a resample leaves a statistic undefined every time, e.g. a constant rater)."""
    k = len(values)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n = len(a)
    point = statistics(table(a, b, k), values, kind)
    out: dict[str, Any] = {"n": n}
    draws: dict[str, np.ndarray] = {s: np.array([]) for s in point}
    if n:
        rng = np.random.default_rng(seed)
        codes = a * k + b
        picks = codes[rng.integers(0, n, (resamples, n))]
        offsets = (np.arange(resamples) * k * k)[:, None]
        tables = np.bincount((picks + offsets).ravel(), minlength=resamples * k * k)
        draws = statistics(tables.reshape(resamples, k, k).astype(float), values, kind)
    for s, v in point.items():
        d = np.asarray(draws[s], dtype=float)
        d = d[~np.isnan(d)]
        lo, hi = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) if len(d) else (None, None)
        out[s] = {"value": None if math.isnan(v) else round(v, 4),
                  "lo": None if lo is None else round(lo, 4), "hi": None if hi is None else round(hi, 4)}
    return out
