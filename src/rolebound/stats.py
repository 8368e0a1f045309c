"""Statistics, numbers only (formatting is report/fmt.py). Pure: no model calls, no plotting.

- rates with a bootstrap CI, mean +- SEM, mean and std: what every suite's metrics use;
- position bias of multiple-choice answers, where the picks fall against where the gold answers
  are (`position_bias`), and accuracy under shifted option orders (`shifted_orders`): the figures
  report.build adds to every run's metrics. A multiple-choice record names its stage in
  `meta.mc` and its option labels, in the order shown, in `meta.labels`; `parsed` and `gold` are
  labels (numbers are compared as text). Calls asked under another option order (`meta.shift`,
  `meta.control`) are left out of position bias: that is the paper's order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Sequence

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


# -- position bias of multiple-choice answers ------------------------------------------------------
# picks "follow position" when more than this share of the answers sits at one position ...
PICK_SHARE = 50.0
# ... that holds at most this share of the gold answers, and the chi-square test agrees
GOLD_SHARE = 25.0
ALPHA = 0.05


def mc_records(records: Iterable) -> dict[str, list]:
    """stage -> the paper-order multiple-choice answers of the model under test."""
    out: dict[str, list] = defaultdict(list)
    for r in records:
        m = r.meta or {}
        if r.role == "model" and r.error is None and m.get("mc") and m.get("labels") \
                and not m.get("shift") and not m.get("control"):
            out[m["mc"]].append(r)
    return dict(sorted(out.items()))


def _pos(labels: list[str], value: Any) -> int | None:
    s = None if value is None else str(value)
    return labels.index(s) if s in labels else None


def chi_square(picks: list[int], golds: list[int]) -> dict[str, Any]:
    """Chi-square test of homogeneity: do the picks fall on the positions as the gold answers do?
    (a 2 x k table; positions empty in both rows dropped)."""
    cols = [i for i in range(len(picks)) if picks[i] + golds[i] > 0]
    if len(cols) < 2 or not sum(picks) or not sum(golds):
        return {"chi2": None, "dof": None, "p": None}
    obs = np.array([[picks[i] for i in cols], [golds[i] for i in cols]], dtype=float)
    exp = obs.sum(1, keepdims=True) * obs.sum(0, keepdims=True) / obs.sum()
    dof = len(cols) - 1
    if dof == 1:     # Yates' continuity correction, as scipy.stats.chi2_contingency applies to 2 x 2
        diff = exp - obs
        obs = obs + np.sign(diff) * np.minimum(0.5, np.abs(diff))
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    return {"chi2": chi2, "dof": dof, "p": chi2_sf(chi2, dof)}


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for a chi-square variable with a whole number of degrees of freedom, in closed
    form (the regularized upper gamma function at a whole or half-whole shape). Importing
    scipy.special for it cost every report 0.2 s of start-up."""
    if x <= 0:
        return 1.0
    h = x / 2
    if dof % 2 == 0:     # Q(m, h) = e^-h * sum_{j<m} h^j / j!
        term, total = math.exp(-h), 0.0
        for j in range(dof // 2):
            total += term
            term *= h / (j + 1)
        return min(1.0, total)
    # Q(m + 1/2, h) = erfc(sqrt h) + e^-h * sum_{j<m} h^(j+1/2) / Gamma(j + 3/2)
    term, total = math.exp(-h) * math.sqrt(h) / math.gamma(1.5), math.erfc(math.sqrt(h))
    for j in range(dof // 2):
        total += term
        term *= h / (j + 1.5)
    return min(1.0, total)


def stage_bias(recs: list) -> dict[str, Any]:
    labels = max((list(map(str, r.meta["labels"])) for r in recs), key=len)
    k = len(labels)
    picks, golds = [0] * k, [0] * k
    invalid = 0
    for r in sorted(recs, key=lambda r: r.call_id):
        lab = list(map(str, r.meta["labels"]))
        p, g = _pos(lab, r.parsed), _pos(lab, r.gold)
        if p is None:
            invalid += 1
        else:
            picks[p] += 1
        if g is not None:
            golds[g] += 1
    n_p, n_g = sum(picks), sum(golds)
    pick_share = [100.0 * c / n_p if n_p else None for c in picks]
    gold_share = [100.0 * c / n_g if n_g else None for c in golds]
    out = {"n": len(recs), "answered": n_p, "invalid": invalid, "with_gold": n_g, "labels": labels,
           "picks": picks, "golds": golds, "pick_share": pick_share, "gold_share": gold_share,
           **chi_square(picks, golds), "follows_position": None}
    significant = out["p"] is not None and out["p"] < ALPHA
    for i in range(k if significant else 0):
        if pick_share[i] is not None and gold_share[i] is not None and pick_share[i] > PICK_SHARE \
                and gold_share[i] <= GOLD_SHARE:
            out["follows_position"] = {"position": i + 1, "label": labels[i], "pick_share": pick_share[i],
                                       "gold_share": gold_share[i]}
            break
    return out


def warning_text(stage: str, b: dict[str, Any]) -> str:
    f = b["follows_position"]
    p = f" (chi-square p = {b['p']:.2g})" if b.get("p") is not None else ""
    return (f"{stage}: the picks follow position, not content: {f['pick_share']:.0f}% of the answers are option "
            f"{f['label']} (position {f['position']}), which holds {f['gold_share']:.0f}% of the gold answers{p}")


def position_bias(records: Iterable) -> dict[str, Any]:
    """Position bias of every multiple-choice stage: {"stages": {stage: shares, test,
    follows_position}, "warnings": [text, ...]}."""
    stages = {s: stage_bias(recs) for s, recs in mc_records(records).items()}
    warnings = [warning_text(s, b) for s, b in stages.items() if b["follows_position"]]
    return {"stages": stages, "warnings": warnings,
            "rule": f"a warning when more than {PICK_SHARE:.0f}% of the answers sit at one position that holds "
                    f"at most {GOLD_SHARE:.0f}% of the gold answers and the chi-square test gives p < {ALPHA}"}


# -- answers under shifted option orders (--set permutations=K) ------------------------------------
def _base_id(call_id: str) -> str:
    import re

    return re.sub(r"~s\d+", "", call_id)


def chosen(r) -> int | None:
    """The chosen option by content: its index in the paper's order (meta.order maps shown
    positions to it; absent: the paper's order)."""
    labels = list(map(str, (r.meta or {}).get("labels") or []))
    p = _pos(labels, r.parsed)
    if p is None:
        return None
    order = (r.meta or {}).get("order")
    return order[p] if order else p


def shifted_orders(records: Iterable) -> dict[str, Any]:
    """Per stage: accuracy under each cyclic shift of the options (0 = the paper's order) and the
    consistency (share of items whose chosen option, by content, is the same under every shift),
    over the items asked under all of them. {} when no call was shifted."""
    recs = [r for r in records if r.role == "model" and r.error is None and (r.meta or {}).get("mc")
            and (r.meta or {}).get("labels") and not (r.meta or {}).get("control")]
    by: dict[str, dict[str, dict[int, Any]]] = defaultdict(lambda: defaultdict(dict))
    for r in sorted(recs, key=lambda r: r.call_id):
        by[r.meta["mc"]][_base_id(r.call_id)][int(r.meta.get("shift") or 0)] = r
    out = {}
    for stage, items in sorted(by.items()):
        k = max((max(v) for v in items.values()), default=0) + 1
        if k < 2:
            continue
        full = {i: v for i, v in items.items() if len(v) == k}
        acc = {str(s): rate_ci([bool(v[s].correct) for v in full.values()]) for s in range(k)}
        same = [len({chosen(v[s]) for s in range(k)}) == 1 and chosen(v[0]) is not None for v in full.values()]
        out[stage] = {"shifts": k, "items": len(full), "accuracy": acc, "consistency": rate_ci(same)}
    return out
