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


def _midranks(counts: np.ndarray) -> np.ndarray:
    before = np.cumsum(counts) - counts
    return before + (counts + 1) / 2


def spearman(t: np.ndarray) -> float:
    """Pearson correlation of the midranks, weighted by the table."""
    n = t.sum()
    if n < 2:
        return math.nan
    rx, ry = _midranks(t.sum(1)), _midranks(t.sum(0))
    mx, my = (t.sum(1) * rx).sum() / n, (t.sum(0) * ry).sum() / n
    dx, dy = rx - mx, ry - my
    cov = (t * np.outer(dx, dy)).sum()
    vx, vy = (t.sum(1) * dx ** 2).sum(), (t.sum(0) * dy ** 2).sum()
    return float(cov / math.sqrt(vx * vy)) if vx > 0 and vy > 0 else math.nan


def kendall(t: np.ndarray) -> float:
    """Kendall tau-b from the table: concordant minus discordant pairs over the tie-corrected total."""
    n = t.sum()
    # below_right[i, j]: pairs strictly greater on both; below_left: greater on a, smaller on b
    suffix = np.cumsum(np.cumsum(t[::-1, ::-1], 0), 1)[::-1, ::-1]
    below_right = np.zeros_like(t)
    below_right[:-1, :-1] = suffix[1:, 1:]
    prefix_cols = np.cumsum(np.cumsum(t[::-1, :], 0), 1)[::-1, :]
    below_left = np.zeros_like(t)
    below_left[:-1, 1:] = prefix_cols[1:, :-1]
    conc, disc = (t * below_right).sum(), (t * below_left).sum()
    n0 = n * (n - 1) / 2
    ta = (t.sum(1) * (t.sum(1) - 1) / 2).sum()
    tb = (t.sum(0) * (t.sum(0) - 1) / 2).sum()
    den = math.sqrt((n0 - ta) * (n0 - tb))
    return float((conc - disc) / den) if den > 0 else math.nan


def kappa(t: np.ndarray, weights: str | None = None) -> float:
    """Cohen's kappa; weights="quadratic" for the weighted kappa on an ordinal grid."""
    n = t.sum()
    if n == 0:
        return math.nan
    k = t.shape[0]
    i, j = np.indices((k, k))
    w = ((i - j) ** 2 / (k - 1) ** 2) if weights == "quadratic" else (i != j).astype(float)
    expected = np.outer(t.sum(1), t.sum(0)) / n
    den = (w * expected).sum()
    return float(1 - (w * t).sum() / den) if den > 0 else math.nan


def exact(t: np.ndarray) -> float:
    n = t.sum()
    return float(np.trace(t) / n) if n else math.nan


def mae(t: np.ndarray, values: Sequence[float]) -> float:
    n = t.sum()
    v = np.asarray(values, dtype=float)
    return float((t * np.abs(v[:, None] - v[None, :])).sum() / n) if n else math.nan


def statistics(t: np.ndarray, values: Sequence[float], kind: str) -> dict[str, float]:
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
    draws: dict[str, list[float]] = {s: [] for s in point}
    if n:
        rng = np.random.default_rng(seed)
        codes = a * k + b
        for _ in range(resamples):
            pick = codes[rng.integers(0, n, n)]
            st = statistics(np.bincount(pick, minlength=k * k).reshape(k, k).astype(float), values, kind)
            for s, v in st.items():
                draws[s].append(v)
    for s, v in point.items():
        d = np.asarray([x for x in draws[s] if not math.isnan(x)])
        lo, hi = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) if len(d) else (None, None)
        out[s] = {"value": None if math.isnan(v) else round(v, 4),
                  "lo": None if lo is None else round(lo, 4), "hi": None if hi is None else round(hi, 4)}
    return out
