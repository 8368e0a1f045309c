"""Dialogue metrics: pure functions of records.

A suite turns the probe records of one (warm-up, depth) into per-key 0/1 values for each of its
headline metrics (CHARM: BA, BC, C-Gap, R-Fail per item or instance), usually by relabelling them
as its single-turn records and running its own metric code, so depth 0 is the single-turn figure
by construction. Here: the rate with a bootstrap CI at every depth, the change from depth 0 with
a paired bootstrap CI over the keys present at both depths, and the drift slope (least squares
over the depths, in points per 4 turns) with a bootstrap CI over the keys present at every depth.
Keys are sorted and the generator seeded, so the figures do not depend on record order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..stats import N_BOOT, rate_ci
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


def paired(a: dict, b: dict, *, seed: int = 0, n_boot: int = N_BOOT) -> dict | None:
    """b - a (percentage points) over the keys in both, with a percentile bootstrap CI."""
    keys = sorted(set(a) & set(b))
    if not keys:
        return None
    va = np.array([float(a[k]) for k in keys])
    vb = np.array([float(b[k]) for k in keys])
    point = 100.0 * float((vb - va).mean())
    if len(keys) == 1:
        return {"diff": point, "lo": point, "hi": point, "n": 1}
    idx = np.random.default_rng(seed).integers(0, len(keys), size=(n_boot, len(keys)))
    lo, hi = np.quantile(100.0 * (vb[idx] - va[idx]).mean(axis=1), [0.025, 0.975])
    return {"diff": point, "lo": float(lo), "hi": float(hi), "n": len(keys)}


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of y against x."""
    xc = x - x.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc ** 2).sum()


def drift(per_depth: dict[int, dict], *, seed: int = 0, n_boot: int = N_BOOT) -> dict | None:
    """Points per PER_TURNS turns over the keys present at every depth (needs two depths)."""
    ds = sorted(per_depth)
    if len(ds) < 2:
        return None
    keys = sorted(set.intersection(*(set(per_depth[d]) for d in ds)))
    if not keys:
        return None
    x = np.array(ds, dtype=float)
    m = np.array([[float(per_depth[d][k]) for d in ds] for k in keys])       # keys x depths
    point = float(_slope(x, 100.0 * m.mean(axis=0))) * PER_TURNS
    if len(keys) == 1:
        return {"slope": point, "lo": point, "hi": point, "n": 1, "per_turns": PER_TURNS}
    idx = np.random.default_rng(seed).integers(0, len(keys), size=(n_boot, len(keys)))
    boots = _slope(x, 100.0 * m[idx].mean(axis=1)) * PER_TURNS
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"slope": point, "lo": float(lo), "hi": float(hi), "n": len(keys), "per_turns": PER_TURNS}


def series(per_depth: dict[int, dict]) -> dict[str, Any]:
    """One metric for one warm-up kind: rows by depth, and the drift slope."""
    base = per_depth.get(0)
    rows = []
    for d in sorted(per_depth):
        vals = per_depth[d]
        row = {"depth": d, **rate_ci([vals[k] for k in sorted(vals)])}
        row["change"] = paired(base, vals) if d and base else None
        rows.append(row)
    return {"rows": rows, "drift": drift(per_depth)}


def compute(records, values: Callable[[list], dict[str, dict]], names: list[str]) -> dict[str, Any]:
    """{depths, warmups, metrics: {name: {kind: series}}, turns: counts} for a run's probes.
    `values(recs)` gives {metric name: {key: 0/1}} for the probe records of one (kind, depth)."""
    kinds, ds, grouped = groups(records)
    if not grouped:
        return {}
    per: dict[str, dict[str, dict[int, dict]]] = {n: {k: {} for k in kinds} for n in names}
    for (kind, d), recs in grouped.items():
        for name, vals in values(recs).items():
            if name in per and vals:
                per[name][kind][d] = vals
    turns = [r for r in records if r.strategy == DIALOGUE and r.stage.startswith("turn@")]
    users = [r for r in records if r.strategy == DIALOGUE and r.stage.startswith("user@")]
    return {"depths": ds, "warmups": kinds, "names": names,
            "metrics": {n: {k: series(v) for k, v in by_kind.items() if v} for n, by_kind in per.items()},
            "turns": {"calls": len(turns), "failed": sum(1 for r in turns if r.error),
                      "dialogues": len({r.item_id for r in turns}), "user_calls": len(users),
                      "completion_tokens": sum(r.completion_tokens or 0 for r in turns),
                      "prompt_tokens": sum(r.prompt_tokens or 0 for r in turns)},
            "probes": len(probe_records(records))}
