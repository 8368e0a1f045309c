"""Small statistics shared by every suite's metrics. Pure functions, no model calls."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

N_BOOT = 2000


def rate(values: Sequence[bool | int | float]) -> float | None:
    """Percentage of true values; None for an empty set."""
    v = [float(x) for x in values]
    return 100.0 * sum(v) / len(v) if v else None


def bootstrap_ci(values: Sequence[bool | int | float], *, n_boot: int = N_BOOT, seed: int = 0,
                 level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of the mean, in percent. Seeded, so reports are reproducible."""
    # sorted: the interval must not depend on the order records happened to be written in
    v = np.sort(np.asarray([float(x) for x in values]))
    if v.size == 0:
        return (None, None)
    if v.size == 1 or np.all(v == v[0]):
        return (100.0 * float(v[0]), 100.0 * float(v[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(n_boot, v.size))
    means = v[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (100.0 * float(lo), 100.0 * float(hi))


def rate_ci(values: Sequence, **kw) -> dict:
    """{'rate', 'lo', 'hi', 'n'} for a list of booleans (rate and CI in percent)."""
    lo, hi = bootstrap_ci(values, **kw)
    return {"rate": rate(values), "lo": lo, "hi": hi, "n": len(values)}


def mean_sem(values: Iterable[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (sample std, ddof=1). One value: SEM 0."""
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return (None, None)
    if len(v) == 1:
        return (v[0], 0.0)
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
    return (m, sd / math.sqrt(len(v)))


def mean_std(values: Iterable[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof=1); one value: std 0."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return (None, None)
    if len(v) == 1:
        return (v[0], 0.0)
    m = sum(v) / len(v)
    return (m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)))
