"""Dialogue metrics: pure functions of records.

A suite turns the probe records of one (warm-up, depth) into per-key 0/1 values for each of its
headline metrics (CHARM: BA, BC, C-Gap, R-Fail per item or instance), usually by relabelling them
as its single-turn records and running its own metric code, so depth 0 is the single-turn figure
by construction. Here: the rate with a bootstrap CI at every depth, the change from depth 0 with
a paired bootstrap CI over the keys present at both depths, and the drift slope (least squares
over the depths, in points per 4 turns) with a bootstrap CI over the keys present at every depth.
Every CI resamples clusters: a suite's `clusters(recs)` maps each key to the character its
dialogue plays (every probe of one role branches off that role's one conversation, so they are
not independent); without it each key is its own. Keys are sorted and the generator seeded, so
the figures do not depend on record order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..stats import N_BOOT, MIN_CLUSTERS, paired_diff, rate_ci
from ..suites.base import DIALOGUE

PER_TURNS = 4       # the drift slope is given per this many turns


def probe_records(records) -> list:
    return [r for r in records if r.strategy == DIALOGUE and r.role == "model" and r.error is None
            and (r.meta or {}).get("depth") is not None]


def groups(records) -> tuple[list[str], list[int], dict[tuple[str, int], list]]:
    """(warm-up kinds, depths, {(kind, depth): probe records}); depth 0 belongs to every kind."""
    recs = probe_records(records)
    kinds = sorted({r.meta["warmup"] for r in recs if r.meta.get("warmup")})
    depths = sorted({int(r.meta["depth"]) for r in recs})
    out: dict[tuple[str, int], list] = {}
    for r in recs:
        d = int(r.meta["depth"])
        for k in ([r.meta["warmup"]] if d else kinds or ["none"]):
            out.setdefault((k, d), []).append(r)
    return kinds or ["none"], depths, out


def relabel(recs, strategy: str, stage: Callable[[Any], str]) -> list:
    """The probe records as the suite's single-turn records (same answers, single-turn names)."""
    return [r.model_copy(update={"strategy": strategy, "stage": stage(r), "item_id": r.item_id}) for r in recs]


def paired(a: dict, b: dict, clusters: dict | None = None, *, seed: int = 0, n_boot: int = N_BOOT) -> dict | None:
    """b - a (percentage points) over the keys in both, with a paired cluster-bootstrap CI
    (stats.paired_diff; `clusters`: key -> cluster, none: each key its own)."""
    if not set(a) & set(b):
        return None
    return paired_diff(a, b, clusters, n_boot=n_boot, seed=seed)


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of y against x."""
    xc = x - x.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc ** 2).sum()


def drift(per_depth: dict[int, dict], clusters: dict | None = None, *, seed: int = 0,
          n_boot: int = N_BOOT) -> dict | None:
    """Points per PER_TURNS turns over the keys present at every depth (needs two depths); the CI
    resamples whole clusters (`clusters`: key -> cluster; none: each key its own)."""
    ds = sorted(per_depth)
    if len(ds) < 2:
        return None
    keys = sorted(set.intersection(*(set(per_depth[d]) for d in ds)), key=str)
    if not keys:
        return None
    x = np.array(ds, dtype=float)
    m = np.array([[float(per_depth[d][k]) for d in ds] for k in keys])       # keys x depths
    point = float(_slope(x, 100.0 * m.mean(axis=0))) * PER_TURNS
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(str((clusters or {}).get(k, k)), []).append(i)
    g = len(groups)
    out = {"slope": point, "lo": point, "hi": point, "n": len(keys), "clusters": g, "trusted": g >= MIN_CLUSTERS,
           "per_turns": PER_TURNS}
    if g == 1:
        return out
    # per cluster: its keys' sums at each depth and its count; a draw's rate is the drawn sums over counts
    sums = np.array([m[groups[c]].sum(axis=0) for c in sorted(groups)])
    counts = np.array([len(groups[c]) for c in sorted(groups)], dtype=float)
    idx = np.random.default_rng(seed).integers(0, g, size=(n_boot, g))
    boots = _slope(x, 100.0 * sums[idx].sum(axis=1) / counts[idx].sum(axis=1)[:, None]) * PER_TURNS
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {**out, "lo": float(lo), "hi": float(hi)}


def series(per_depth: dict[int, dict], clusters: dict | None = None) -> dict[str, Any]:
    """One metric for one warm-up kind: rows by depth, and the drift slope (`clusters`: key -> cluster)."""
    base = per_depth.get(0)
    cl = clusters or {}
    rows = []
    for d in sorted(per_depth):
        vals = per_depth[d]
        keys = sorted(vals, key=str)
        row = {"depth": d, **rate_ci([vals[k] for k in keys], [str(cl.get(k, k)) for k in keys])}
        row["change"] = paired(base, vals, cl) if d and base else None
        rows.append(row)
    return {"rows": rows, "drift": drift(per_depth, cl)}


def compute(records, values: Callable[[list], dict[str, dict]], names: list[str],
            clusters: Callable[[list], dict] | None = None, cluster_by: str = "item") -> dict[str, Any]:
    """{depths, warmups, metrics: {name: {kind: series}}, turns: counts, cluster} for a run's probes.
    `values(recs)` gives {metric name: {key: 0/1}} for the probe records of one (kind, depth);
    `clusters(recs)` {key: cluster} (the character the dialogue plays: the unit it repeats)."""
    kinds, ds, grouped = groups(records)
    if not grouped:
        return {}
    per: dict[str, dict[str, dict[int, dict]]] = {n: {k: {} for k in kinds} for n in names}
    cl: dict = {}
    for (kind, d), recs in grouped.items():
        if clusters is not None:
            cl.update(clusters(recs))
        for name, vals in values(recs).items():
            if name in per and vals:
                per[name][kind][d] = vals
    turns = [r for r in records if r.strategy == DIALOGUE and r.stage.startswith("turn@")]
    users = [r for r in records if r.strategy == DIALOGUE and r.stage.startswith("user@")]
    return {"depths": ds, "warmups": kinds, "names": names, "cluster_by": cluster_by if clusters else "item",
            "metrics": {n: {k: series(v, cl) for k, v in by_kind.items() if v} for n, by_kind in per.items()},
            "turns": {"calls": len(turns), "failed": sum(1 for r in turns if r.error),
                      "dialogues": len({r.item_id for r in turns}), "user_calls": len(users),
                      "completion_tokens": sum(r.completion_tokens or 0 for r in turns),
                      "prompt_tokens": sum(r.prompt_tokens or 0 for r in turns)},
            "probes": len(probe_records(records))}
