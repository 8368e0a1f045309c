"""RoleCapBench metrics from records alone (Table 3, Figures 3, 5, 6). Values on a 0-1 scale.

Per role: TA is the accuracy on every question, IA on questions at or below the role's ceiling,
A on questions above it (the two subsets partition TA's). A role with no question on one side
has no value there (kindergarten has no IA; college and teacher have no A). Table 3 averages
each metric over the roles that have it, with the sample standard deviation across roles.
Judge scores RV, C, RC (0-2) are averaged per role the same way.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from .boxed import KINDS, outcome
from ...stats import bootstrap_ci, cluster_key, mean_std, paired_diff, rate_ci
from ...rejudge import verdicts

METRICS = ("TA", "IA", "A")
JUDGE_DIMS = ("RV", "C", "RC")
NO_ROLE = "no-role"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def answer_records(records: Iterable) -> list:
    # the paper's option order only (`~sK` stages: --set permutations, reported apart)
    return [r for r in records if r.role == "model" and r.stage.startswith("answer") and r.error is None
            and "~s" not in r.stage]


def judge_records(records: Iterable) -> list:
    """The successful judge calls of the newest judge round (re-judging keeps the older ones)."""
    return [r for r in verdicts(records) if r.error is None]


def role_order(records: Iterable) -> list[tuple[str, str, int, str | None]]:
    """(role id, label, rank, ceiling) seen in the records, lowest role first."""
    seen: dict[str, tuple[str, str, int, str | None]] = {}
    for r in records:
        m = r.meta
        if m.get("role") is not None:
            seen[m["role"]] = (m["role"], m.get("role_label", m["role"]), int(m.get("role_rank", 0)),
                               m.get("ceiling"))
    return sorted(seen.values(), key=lambda t: (t[2], t[0]))


def level_order(records: Iterable) -> list[tuple[str, str, int]]:
    seen: dict[str, tuple[str, str, int]] = {}
    for r in records:
        m = r.meta
        if m.get("level") is not None:
            seen[m["level"]] = (m["level"], m.get("level_name", m["level"]), int(m.get("level_rank", 0)))
    return sorted(seen.values(), key=lambda t: (t[2], t[0]))


def macro(values: list[float | None]) -> dict[str, Any]:
    """Mean and sample std over the roles that have a value (Table 3)."""
    v = [x for x in values if x is not None]
    m, sd = mean_std(v)
    return {"mean": m, "std": sd, "n_roles": len(v)}


def macro_ci(recs: list, role_ids: list[str], n_boot: int = 1000, seed: int = 0) -> dict[str, tuple]:
    """95% percentile bootstrap CI of the macro TA, IA and A: questions are resampled (every role
    answers the same questions), each role's means recomputed, then averaged over roles. Not in
    the paper, which gives the spread across roles (std) only."""
    import warnings

    import numpy as np

    items = sorted({r.item_id for r in recs})
    if len(items) < 2 or not role_ids:
        return {}
    ix = {q: i for i, q in enumerate(items)}
    # correct[kind][role, item]: NaN where the role has no answer of that kind for the item
    cube = {k: np.full((len(role_ids), len(items)), np.nan) for k in METRICS}
    for ri, rid in enumerate(role_ids):
        for r in recs:
            if r.meta.get("role") != rid:
                continue
            c, inr = float(bool(r.correct)), r.meta.get("in_role")
            cube["TA"][ri, ix[r.item_id]] = c
            if inr is not None:
                cube["IA" if inr else "A"][ri, ix[r.item_id]] = c
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(items), size=(n_boot, len(items)))
    out = {}
    for k, m in cube.items():
        if np.all(np.isnan(m)):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)         # a resample with no answer of a kind
            per_role = np.nanmean(m[:, draws], axis=2)        # (roles, n_boot)
            macro_draws = np.nanmean(per_role, axis=0)
        macro_draws = macro_draws[~np.isnan(macro_draws)]
        if macro_draws.size:
            lo, hi = np.quantile(macro_draws, [0.025, 0.975])
            out[k] = (float(lo), float(hi))
    return out


def role_metrics(recs: list, judged: dict[str, dict]) -> dict[str, Any]:
    """TA, IA, A (and judge means) of one role's answer records."""
    allc = [bool(r.correct) for r in recs]
    inr = [bool(r.correct) for r in recs if r.meta.get("in_role") is True]
    above = [bool(r.correct) for r in recs if r.meta.get("in_role") is False]
    out: dict[str, Any] = {"TA": _mean(allc), "IA": _mean(inr), "A": _mean(above),
                           "n": len(allc), "n_in": len(inr), "n_above": len(above)}
    for dim in JUDGE_DIMS:
        vals = [judged[r.call_id][dim] for r in recs
                if r.call_id in judged and judged[r.call_id].get(dim) is not None]
        out[dim] = _mean([float(x) for x in vals])
        out[f"n_{dim}"] = len(vals)
    return out


def outcomes(recs: list) -> dict[str, int]:
    counts = {k: 0 for k in KINDS}
    for r in recs:
        counts[outcome(r.response)] += 1
    counts["total"] = len(recs)
    return counts


def paired_deltas(recs: list, base: list, clusters: dict | None) -> dict[str, Any]:
    """A variant against identity on the same (question, role, repeat) answers: TA, IA, A each as a
    paired difference in points, its CI resampling questions (the suite's cluster)."""
    def values(rs, keep):
        return {(r.item_id, r.meta.get("role"), r.repeat): bool(r.correct) for r in rs if keep(r)}

    cl = {(r.item_id, r.meta.get("role"), r.repeat): cluster_key(r, clusters) for r in base}
    keeps = {"TA": lambda r: True, "IA": lambda r: r.meta.get("in_role") is True,
             "A": lambda r: r.meta.get("in_role") is False}
    return {k: paired_diff(values(base, keep), values(recs, keep), cl) for k, keep in keeps.items()}


def compute(records: list, strategies: list[str], clusters: dict | None = None) -> dict[str, Any]:
    """Every figure; `clusters`: the suite's declaration (CapabilitySuite.clusters: by question)."""
    answers = answer_records(records)
    # judge record -> the answer call it scored (meta.judged)
    judged: dict[str, dict] = {}
    judge_invalid: dict[str, int] = defaultdict(int)
    for j in judge_records(records):
        target = j.meta.get("judged")
        if isinstance(j.parsed, dict):
            judged[target] = j.parsed
        else:
            judge_invalid[j.strategy] += 1
    roles = role_order(answers)
    levels = level_order(answers)
    out: dict[str, Any] = {
        "roles": [{"id": r, "label": lab, "rank": rank, "ceiling": ceil} for r, lab, rank, ceil in roles],
        "levels": [{"id": lv, "name": name, "rank": rank} for lv, name, rank in levels],
        "by_strategy": {}, "no_role": None, "deltas": {},
        "failed_calls": sum(1 for r in records if r.error),
    }
    for strat in strategies:
        recs = [r for r in answers if r.strategy == strat]
        if strat == NO_ROLE:
            lo, hi = bootstrap_ci([bool(r.correct) for r in recs], clusters=[cluster_key(r, clusters) for r in recs])
            out["no_role"] = {"TA": _mean([bool(r.correct) for r in recs]), "n": len(recs),
                              "lo": None if lo is None else lo / 100, "hi": None if hi is None else hi / 100,
                              "by_level": {lv: _mean([bool(r.correct) for r in recs if r.meta.get("level") == lv])
                                           for lv, _, _ in levels},
                              "outcomes": outcomes(recs)}
            continue
        per_role = {}
        grid: dict[str, dict[str, dict]] = {}
        for rid, _, _, _ in roles:
            rr = [r for r in recs if r.meta.get("role") == rid]
            if not rr:
                continue
            per_role[rid] = role_metrics(rr, judged)
            grid[rid] = {}
            for lv, _, _ in levels:
                cell = [bool(r.correct) for r in rr if r.meta.get("level") == lv]
                above = [r.meta.get("in_role") is False for r in rr if r.meta.get("level") == lv]
                grid[rid][lv] = {"acc": _mean(cell), "n": len(cell), "above": bool(above and all(above))}
        mac = {k: macro([m[k] for m in per_role.values()]) for k in METRICS + JUDGE_DIMS}
        for k, (lo, hi) in macro_ci(recs, list(per_role)).items():
            mac[k]["lo"], mac[k]["hi"] = lo, hi
        # TA pooled over (question, role) answers, clustered by question: Table 3's macro TA when every
        # role answers every question; the headline table's figure
        pooled = rate_ci([bool(r.correct) for r in recs], [cluster_key(r, clusters) for r in recs])
        out["by_strategy"][strat] = {"per_role": per_role, "macro": mac, "grid": grid, "ta_pooled": pooled,
                                     "outcomes": outcomes(recs), "n": len(recs),
                                     "judged": sum(1 for r in recs if r.call_id in judged),
                                     "judge_invalid": judge_invalid.get(strat, 0)}
    base = out["by_strategy"].get("identity")
    if base:
        for strat, m in out["by_strategy"].items():
            if strat == "identity":
                continue
            d = {}
            for k in METRICS:
                a, b = m["macro"][k]["mean"], base["macro"][k]["mean"]
                d[k] = None if a is None or b is None else a - b
            out["deltas"][strat] = d
            out.setdefault("deltas_paired", {})[strat] = paired_deltas(
                [r for r in answers if r.strategy == strat], [r for r in answers if r.strategy == "identity"], clusters)
    return out


# -- the dialogue strategy: TA, IA, A by depth (rolebound.dialogue.metrics) ----------------------
DIALOGUE_NAMES = ["TA", "IA", "A"]


def dialogue_values(recs) -> dict[str, dict]:
    """Pooled over (question, role) answers: TA equals Table 3's macro mean (every role answers
    every question); IA and A weigh the roles by their questions."""
    key = {id(r): f"{r.item_id}|{r.meta.get('role')}" for r in recs}
    return {"TA": {key[id(r)]: bool(r.correct) for r in recs},
            "IA": {key[id(r)]: bool(r.correct) for r in recs if r.meta.get("in_role") is True},
            "A": {key[id(r)]: bool(r.correct) for r in recs if r.meta.get("in_role") is False}}


def dialogue(records) -> dict[str, Any]:
    from ...dialogue.metrics import compute as by_depth

    return by_depth(records, dialogue_values, DIALOGUE_NAMES, dialogue_clusters,
                    "role (every probe of a role follows its one conversation)")


def dialogue_clusters(recs) -> dict[str, str]:
    """Each key's cluster: the role its dialogue plays (the plan's key, strategies.py)."""
    return {f"{r.item_id}|{r.meta.get('role')}": f"role={r.meta.get('role')}" for r in recs}
