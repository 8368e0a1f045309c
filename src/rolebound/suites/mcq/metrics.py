"""The mcq suite's metrics: accuracy with a bootstrap CI per strategy (and per group), from records alone."""

from __future__ import annotations

from typing import Any

from ...records import INVALID
from ...stats import cluster_key, rate_ci


def compute(records, strategies: list[str], clusters: dict | None = None) -> dict[str, Any]:
    """Accuracy per strategy, clustered as the suite declares (by item: its repeats share one)."""
    out: dict[str, Any] = {"by_strategy": {}}
    for strat in strategies:
        recs = [r for r in records if r.strategy == strat and r.stage == "answer" and r.error is None]
        res = rate_ci([bool(r.correct) for r in recs], [cluster_key(r, clusters) for r in recs])
        res["invalid"] = sum(1 for r in recs if r.parsed == INVALID)
        groups: dict[str, list] = {}
        for r in recs:
            if r.meta.get("group") is not None:
                groups.setdefault(str(r.meta["group"]), []).append(r)
        res["by_group"] = {g: rate_ci([bool(r.correct) for r in v], [cluster_key(r, clusters) for r in v])
                           for g, v in sorted(groups.items())}
        out["by_strategy"][strat] = res
    out["failed_calls"] = sum(1 for r in records if r.error)
    return out
