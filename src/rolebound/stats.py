"""Statistics, numbers only (formatting is report/fmt.py). Pure: no model calls, no plotting.

- rates with a bootstrap CI, mean +- SEM, mean and std: what every suite's metrics use;
- position bias of multiple-choice answers, where the picks fall against where the gold answers
  are (`position_bias`), and accuracy under shifted option orders (`shifted_orders`): the figures
  report.build adds to every run's metrics. A multiple-choice record names its stage in
  `meta.mc` and its option labels, in the order shown, in `meta.labels`; `parsed` and `gold` are
  labels (numbers are compared as text). Calls asked under another option order (`meta.shift`,
  `meta.control`) are left out of position bias: that is the paper's order;
- clustered uncertainty (issue 51): a benchmark repeats its units (one prompt asked of four
  characters, one question under six roles, `--repeats`), so its items are not independent. Each
  suite declares the cluster of a record as data (`Suite.clusters`, read by `cluster_key`);
  `rate_ci(values, clusters=...)` then resamples whole clusters and adds the clustered standard
  error as inspect_ai defines it (`clustered_se`), the design effect and the minimum detectable
  difference (`mdd`); `paired_diff` and `mcnemar` compare two sets of outcomes on the same items.
  Below MIN_CLUSTERS clusters an interval is flagged as not to be trusted.
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
                 level: float = 0.95, clusters: Sequence[Any] | None = None) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of the mean, in percent. Seeded, so reports are reproducible.
    `clusters`: one key per value; whole clusters are resampled (a cluster bootstrap)."""
    if clusters is not None:
        return _cluster_bootstrap(values, clusters, n_boot=n_boot, seed=seed, level=level)
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


def rate_ci(values: Sequence, clusters: Sequence[Any] | None = None, **kw) -> dict:
    """{'rate', 'lo', 'hi', 'n'} for a list of booleans (rate and CI in percent). With `clusters`
    (one key per value) the CI resamples clusters, and the dict adds uncertainty()'s figures."""
    lo, hi = bootstrap_ci(values, clusters=clusters, **kw)
    out = {"rate": rate(values), "lo": lo, "hi": hi, "n": len(values)}
    if clusters is not None and values:
        out.update(uncertainty(values, clusters))
    return out


# -- clusters ---------------------------------------------------------------------------------------
MIN_CLUSTERS = 10          # fewer: no interval is trusted (a bootstrap over a handful of units says little)
Z_975, Z_80 = 1.959963984540054, 0.8416212335729143     # two-sided 0.05; 80% power


def cluster_key(record, spec: dict[str, Sequence[str]] | None, stage: str | None = None) -> str:
    """The cluster of a record under a suite's declaration (`Suite.clusters`): `spec` maps a stage
    (`stage`, else the record's; or "*") to meta keys (or record fields; "a+b" joins two), the
    first one set wins; none set: the item, so the repeats of an item always share a cluster (a
    key never holds the repeat). `spec["strata"]`: meta keys of fixed strata of the design
    (CHARM's boundary types): the key then starts with the stratum, 'boundary=cross||target=...'
    (STRATUM between them), and clusters are resampled
    within their stratum (a stratum's share of the items is the design's, not a random draw)."""
    spec = spec or {}
    meta = record.meta or {}

    def first(keys) -> str | None:
        for k in keys:      # "a+b": both fields together (a dilemma type within a version)
            vs = [meta.get(p, getattr(record, p, None)) for p in k.split("+")]
            if all(v is not None for v in vs):
                return f"{k}={'/'.join(map(str, vs))}"
        return None

    key = first(spec.get(stage or record.stage, spec.get("*", ()))) or f"item={record.item_id}"
    stratum = first(spec.get("strata", ()))
    return f"{stratum}{STRATUM}{key}" if stratum else key


STRATUM = "||"       # between a cluster key's stratum and its cluster


def cluster_by_text(spec: dict[str, Sequence[str]] | None, stage: str) -> str:
    """What a stage's records are clustered by, in words ('fact, else target, within boundary')."""
    spec = spec or {}
    keys = spec.get(stage, spec.get("*", ()))
    within = f", within {', '.join(spec['strata'])}" if spec.get("strata") else ""
    return (", else ".join(keys) if keys else "item") + within


def _partition(values: Sequence, clusters: Sequence) -> dict[str, list[np.ndarray]]:
    """stratum -> the values of each of its clusters. Strata and clusters in sorted key order and
    values sorted within each: the figures depend on the set of (cluster, value) pairs, never on
    the order of the records."""
    if len(clusters) != len(values):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster keys")
    groups: dict[str, list[float]] = defaultdict(list)
    for v, c in zip(values, clusters):
        groups[str(c)].append(float(v))
    out: dict[str, list[np.ndarray]] = defaultdict(list)
    for k in sorted(groups):
        out[k.split(STRATUM, 1)[0] if STRATUM in k else ""].append(np.sort(np.asarray(groups[k])))
    return dict(sorted(out.items()))


def _cluster_bootstrap(values, clusters, *, n_boot: int, seed: int, level: float):
    strata = _partition(values, clusters)
    if not strata:
        return (None, None)
    point = rate(values)
    parts = [p for ps in strata.values() for p in ps]
    allv = np.concatenate(parts)
    if len(parts) == 1 or np.all(allv == allv[0]):
        return (point, point)
    rng = np.random.default_rng(seed)
    tot, cnt = np.zeros(n_boot), np.zeros(n_boot)
    for ps in strata.values():          # each stratum keeps its number of clusters
        sums = np.array([p.sum() for p in ps])
        counts = np.array([p.size for p in ps], dtype=float)
        idx = rng.integers(0, len(ps), size=(n_boot, len(ps)))
        tot += sums[idx].sum(axis=1)
        cnt += counts[idx].sum(axis=1)
    lo, hi = (100.0 * float(x) for x in np.quantile(tot / cnt, [(1 - level) / 2, 1 - (1 - level) / 2]))
    # a bound equal to the point but for float rounding (one cluster per stratum) is the point
    return (point if abs(lo - point) < 1e-9 else lo, point if abs(hi - point) < 1e-9 else hi)


def clustered_se(values: Sequence[float], clusters: Sequence[Any]) -> float | None:
    """Clustered standard error of the mean, as inspect_ai's `stderr(cluster=...)` defines it
    (Miller 2024, Appendix A, with the finite-cluster correction C / (C - 1)); 0 for one cluster.
    With strata (cluster_key), the sum of each stratum's term, its cluster totals of the residuals
    centred on their stratum's average (one stratum: inspect_ai's figure exactly)."""
    strata = _partition(values, clusters)
    if not strata:
        return None
    allv = np.concatenate([p for ps in strata.values() for p in ps])
    mean = float(allv.mean())
    var = 0.0
    for ps in strata.values():
        c = len(ps)
        if c < 2:
            continue            # one cluster: no spread to estimate (inspect_ai gives 0 too)
        t = np.array([float((p - mean).sum()) for p in ps])
        var += float(((t - t.mean()) ** 2).sum()) * c / (c - 1)
    return math.sqrt(var) / allv.size


def item_se(values: Sequence[float]) -> float | None:
    """Standard error of the mean with items independent (sample std, ddof=1), as inspect_ai's stderr()."""
    v = [float(x) for x in values]
    if not v:
        return None
    if len(v) < 2:
        return 0.0
    return float(np.std(v, ddof=1)) / math.sqrt(len(v))


def mdd(se: float | None, paired: bool = True) -> float | None:
    """Minimum detectable difference at 80% power, two-sided 0.05, in the unit of `se`. Against
    another run of this size and clustering (`paired`), the difference's SE is taken as sqrt(2) x
    this run's: the other run's outcomes as variable as these and uncorrelated with them item by
    item (a correlation between the runs makes the true figure smaller)."""
    if se is None:
        return None
    return (Z_975 + Z_80) * se * (math.sqrt(2) if paired else 1.0)


def uncertainty(values: Sequence, clusters: Sequence[Any]) -> dict[str, Any]:
    """`clusters` (their number), `se` (clustered, inspect_ai's definition), `se_item` (items
    independent), `deff` (design effect: the clustered variance over the item-level one), `mdd`
    (minimum detectable paired difference) in percent points, and `trusted` (False below
    MIN_CLUSTERS clusters: say so rather than print the bracket)."""
    g = len(set(map(str, clusters)))
    se, se_i = clustered_se(values, clusters), item_se(values)
    deff = (se / se_i) ** 2 if se is not None and se_i else None
    return {"clusters": g, "se": None if se is None else 100.0 * se,
            "se_item": None if se_i is None else 100.0 * se_i,
            "deff": deff, "mdd": None if se is None else 100.0 * mdd(se), "trusted": g >= MIN_CLUSTERS}


def paired_diff(a: dict[Any, float], b: dict[Any, float], clusters: dict[Any, Any] | None = None, *,
                n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """B - A over the keys both hold (percent points), with a paired cluster-bootstrap CI: the
    per-key differences are resampled by cluster (`clusters`: key -> cluster; none: each key its
    own). Also `se` (clustered) and `mdd` of the difference, and for 0/1 outcomes McNemar's exact
    p-value. `only_a` / `only_b`: keys one side alone holds."""
    keys = sorted(set(a) & set(b), key=str)
    d = [float(b[k]) - float(a[k]) for k in keys]
    cl = [str(clusters.get(k, k)) if clusters else str(k) for k in keys]
    out: dict[str, Any] = {"n": len(keys), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)),
                           "a": rate([a[k] for k in keys]), "b": rate([b[k] for k in keys])}
    if not keys:
        return {**out, "diff": None, "lo": None, "hi": None, "clusters": 0, "trusted": False}
    lo, hi = bootstrap_ci(d, clusters=cl, n_boot=n_boot, seed=seed, level=level)
    se = clustered_se(d, cl)
    g = len(set(cl))
    out.update({"diff": 100.0 * sum(d) / len(d), "lo": lo, "hi": hi, "clusters": g, "se": 100.0 * se,
                "mdd": 100.0 * mdd(se, paired=False), "trusted": g >= MIN_CLUSTERS})
    if all(float(a[k]) in (0.0, 1.0) and float(b[k]) in (0.0, 1.0) for k in keys):
        out.update(mcnemar([bool(a[k]) for k in keys], [bool(b[k]) for k in keys]))
    return out


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> dict[str, Any]:
    """McNemar's exact test on paired right/wrong outcomes: a two-sided binomial test
    (scipy.stats.binomtest, p = 0.5) on the discordant pairs. No discordant pair: p = 1."""
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    if a_only + b_only == 0:
        return {"a_only": 0, "b_only": 0, "p": 1.0}
    from scipy.stats import binomtest     # here, not at the top: reports that never compare skip its import

    return {"a_only": a_only, "b_only": b_only, "p": float(binomtest(b_only, a_only + b_only, 0.5).pvalue)}


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
    (a 2 x k table; positions empty in both rows dropped). Item-level: it counts answers, so where
    the design repeats a unit its p is too small; the report's note says so beside it."""
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


def shifted_orders(records: Iterable, clusters: dict[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Per stage: accuracy under each cyclic shift of the options (0 = the paper's order) and the
    consistency (share of items whose chosen option, by content, is the same under every shift),
    over the items asked under all of them. CIs resample the clusters the suite declares
    (`clusters`: Suite.clusters, read from the paper-order record). {} when no call was shifted."""
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
        cl = [cluster_key(v[0], clusters) for v in full.values()]
        acc = {str(s): rate_ci([bool(v[s].correct) for v in full.values()], cl) for s in range(k)}
        same = [len({chosen(v[s]) for s in range(k)}) == 1 and chosen(v[0]) is not None for v in full.values()]
        first = next(iter(full.values()), {}).get(0)
        out[stage] = {"shifts": k, "items": len(full), "accuracy": acc, "consistency": rate_ci(same, cl),
                      "clustered_by": cluster_by_text(clusters, first.stage) if first is not None else "item"}
    return out
