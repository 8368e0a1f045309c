"""PURE: a judge-check run's records -> agreement of the judge with each annotator, with their
mean, and of the annotators with each other (the human ceiling), per score and per group.

Each verdict record carries the row's human labels, group and cluster in `meta` (run.py), so the
metrics need nothing but records.jsonl. Rows are sorted by item id before any resampling: the same
records in any order give the same figures.

The statistics, numbers only: every one is computed from the contingency table of the paired
ratings on a fixed grid of values (the scale's points; 0-5 scores on half points, so the mean of
two annotators fits), which makes a bootstrap of thousands of resamples cheap.
- ordinal scales: Spearman rho and Kendall tau-b (ties handled as scipy does), quadratic-weighted
  Cohen's kappa, exact agreement, mean absolute error;
- nominal scales (yes/no): accuracy (= exact agreement) and Cohen's kappa.
The bootstrap resamples clusters (issue 51): the replies sharing a cluster key (the row's
`cluster`, else the suite's, e.g. a multiverse character's questions of one task, each answered by
five models; else the reply
alone) are drawn together, a resample summing its clusters' tables (draw counts times per-cluster
tables, one matrix product). Clusters are taken in sorted key order with a fixed seed, so the same
pairs in any order give the same intervals; with each reply its own cluster the draws are those
of a bootstrap of the pairs. Below stats.MIN_CLUSTERS clusters no interval is given.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Iterable, Sequence

import numpy as np

from ..records import INVALID
from ..stats import MIN_CLUSTERS, clustered_se, item_se
from .spec import BY_REPLY, JudgeCheck, Scale, reply_cluster

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
              clusters: Sequence[Any] | None = None, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """{n, clusters, trusted, <statistic>: {value, lo, hi}} for paired grid indices a, b (in the
    caller's stable order). `clusters`: one key per pair (none: each pair its own). The interval is
    the 2.5-97.5 percentile of `resamples` cluster-bootstrap resamples: each draws as many clusters
    as there are, with replacement, and sums their contingency tables (None when a resample leaves
    a statistic undefined every time, e.g. a constant rater). Below MIN_CLUSTERS clusters no
    interval is given (`trusted` False). The rates (exact, accuracy) add `deff`, the design effect."""
    k = len(values)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n = len(a)
    codes = a * k + b
    keys = [str(c) for c in clusters] if clusters is not None else list(range(n))
    if len(keys) != n:
        raise ValueError(f"{n} pairs but {len(keys)} cluster keys")
    order = {c: i for i, c in enumerate(sorted(set(keys)))}     # sorted keys: the pairs' order cannot matter
    g = len(order)
    point = statistics(table(a, b, k), values, kind)
    out: dict[str, Any] = {"n": n, "clusters": g, "trusted": g >= MIN_CLUSTERS}
    draws: dict[str, np.ndarray] = {s: np.array([]) for s in point}
    if n and out["trusted"]:
        # per-cluster tables (G x k*k); a resample's table is its draw counts (R x G) times them
        cid = np.array([order[c] for c in keys], dtype=np.int64)
        per = np.bincount(cid * k * k + codes, minlength=g * k * k).reshape(g, k * k).astype(float)
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, g, (resamples, g))
        offsets = (np.arange(resamples) * g)[:, None]
        counts = np.bincount((picks + offsets).ravel(), minlength=resamples * g).reshape(resamples, g)
        draws = statistics((counts.astype(float) @ per).reshape(resamples, k, k), values, kind)
    for s, v in point.items():
        d = np.asarray(draws[s], dtype=float)
        d = d[~np.isnan(d)]
        lo, hi = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) if len(d) else (None, None)
        out[s] = {"value": None if math.isnan(v) else round(v, 4),
                  "lo": None if lo is None else round(lo, 4), "hi": None if hi is None else round(hi, 4)}
        if s in RATES and n:
            out[s]["deff"] = _deff((a == b).astype(float), keys)
    return out


RATES = ("exact", "accuracy")


def _deff(hits: np.ndarray, keys: list) -> float | None:
    """The design effect of a rate (stats.uncertainty's: clustered variance over item-level)."""
    se, se_item = clustered_se(hits, keys), item_se(hits)
    return round((se / se_item) ** 2, 3) if se is not None and se_item else None


# -- the judge against each annotator, per score and group -----------------------------------------
ALL = "all"
MEAN = "mean"
HUMANS = "humans"      # the annotators with each other: the human ceiling


def verdict_rows(records: Iterable, check: JudgeCheck) -> list[dict[str, Any]]:
    """One row per labelled reply: its judge verdict ({} when unread or failed), labels, group."""
    out = {}
    for r in records:
        if r.role != "judge" or "labels" not in (r.meta or {}):
            continue
        if r.stage != "judge" and (r.item_id in out or r.error is None):
            continue       # an earlier step (judge.think): counts only when it failed, ending the row
        scores = check.scores_of(r.parsed) if r.error is None and r.parsed != INVALID else None
        out[r.item_id] = {"id": r.item_id, "group": r.meta.get("group") or "", "labels": r.meta["labels"],
                          # a run recorded before clusters: each reply its own
                          "cluster": r.meta.get("cluster") or reply_cluster(r.item_id),
                          "cluster_by": r.meta.get("cluster_by") or BY_REPLY,
                          "judge": scores or {}, "failed": r.error is not None,
                          "unread": r.error is None and not scores}
    return [out[k] for k in sorted(out)]


def _mean(labels: dict[str, dict], score: str, annotators: list[str]) -> float | None:
    vals = [labels.get(a, {}).get(score) for a in annotators]
    if not annotators or any(v is None for v in vals):
        return None
    return sum(float(v) for v in vals) / len(vals)


def _pairs(rows, scale: Scale, left, right) -> tuple[list[int], list[int], list[str]]:
    a, b, c = [], [], []
    for row in rows:
        i, j = scale.index(left(row)), scale.index(right(row))
        if i is not None and j is not None:
            a.append(i)
            b.append(j)
            c.append(row["cluster"])
    return a, b, c


def _targets(score: str, annotators: list[str], judged: bool, nominal: bool) -> dict[str, tuple]:
    """name -> (left, right) value getters of one comparison."""
    def lab(a):
        return lambda row: row["labels"].get(a, {}).get(score)

    def jud(row):
        return row["judge"].get(score)

    out: dict[str, tuple] = {}
    if judged:
        out.update({a: (jud, lab(a)) for a in annotators})
        if len(annotators) > 1 and not nominal:
            out[MEAN] = (jud, lambda row: _mean(row["labels"], score, annotators))
    for x, y in combinations(annotators, 2):
        out[HUMANS if len(annotators) == 2 else f"{x} vs {y}"] = (lab(x), lab(y))
    return out


def score_block(rows, score: str, scale: Scale, judged: bool, resamples: int, seed: int) -> dict[str, Any]:
    annotators = sorted({a for row in rows for a, labs in row["labels"].items() if labs.get(score) is not None})
    groups = [ALL] + sorted({row["group"] for row in rows if row["group"]})
    grid = scale.grid()
    kind = scale.kind
    out: dict[str, Any] = {"scale": kind, "points": list(scale.points), "judged": judged,
                           "annotators": annotators, "groups": {}}
    for g in groups:
        sub = [row for row in rows if g == ALL or row["group"] == g]
        block = {}
        for name, (left, right) in _targets(score, annotators, judged, kind == "nominal").items():
            a, b, c = _pairs(sub, scale, left, right)
            stats = agreement(a, b, grid, kind, clusters=c, resamples=resamples, seed=seed)
            if name == MEAN:
                stats.pop("exact", None)     # half points: exact agreement with a mean is not defined
            block[name] = stats
        out["groups"][g] = block
    return out


def compute(records, check: JudgeCheck, *, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    rows = verdict_rows(records, check)
    judged = set(check.judged_scales())
    scores = {s: score_block(rows, s, scale, s in judged, resamples, seed) for s, scale in check.scales.items()}
    return {"kind": "judge-check", "rows": len(rows),
            "verdicts": {"read": sum(1 for r in rows if r["judge"]), "unread": sum(1 for r in rows if r["unread"]),
                         "failed": sum(1 for r in rows if r["failed"])},
            "judged": sorted(judged), "bootstrap": {"resamples": resamples, "seed": seed, "ci": 95},
            "clustered_by": clustered_by(rows), "scores": scores}


def clustered_by(rows) -> str:
    """What the rows were clustered by, in words (several kinds: each, '; ' between)."""
    return "; ".join(sorted({row["cluster_by"] for row in rows})) or BY_REPLY


def humans_only(rows, check: JudgeCheck, *, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """The annotators' agreement with each other on labelled rows (no judge): the human ceiling of
    a whole release, e.g. every Beyond One World reply."""
    table = [{"id": r.id, "group": r.group or "", "labels": r.labels, "judge": {},
              **dict(zip(("cluster", "cluster_by"), check.cluster(r)))} for r in sorted(rows, key=lambda r: r.id)]
    return {"kind": "judge-check-humans", "rows": len(table), "bootstrap": {"resamples": resamples, "seed": seed},
            "clustered_by": clustered_by(table),
            "scores": {s: score_block(table, s, scale, False, resamples, seed) for s, scale in check.scales.items()}}
