"""The number formats of every report table, summary line and card: one place, '-' for a missing
value. Here too the headline figures a suite declares for `rolebound card` (its
`card_figures(metrics)` hook: `figure`, `rate`, `diff`, `chart`), which carry their unit and
interval and so their own format (fmt_figure, fmt_value).

Card figures are plain JSON-able dicts, so card.json holds exactly what the page shows. A figure
whose value is None carries `why` (shown as "-" with the reason, never as 0). One format lives
elsewhere because it reads a domain value, not a number: a paper row's (papers.fmt_paper: the
decimals the paper printed). Pure: no plotting, no I/O, nothing of ours imported."""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_num(v: float | None, digits: int = 2) -> str:
    """'0.42' or '-'."""
    return "-" if _missing(v) else f"{v:.{digits}f}"


MIN_CLUSTERS = 10      # stats.MIN_CLUSTERS (fmt imports nothing of ours; tests/test_parsers_stats.py ties them)


def units(d: dict) -> int | None:
    """The independent units behind an interval: its clusters, else (a rate_ci / paired_diff dict)
    its items, each its own cluster. A card figure counts only the clusters it carries (rate() and
    diff() carry them): its `n` may count something else (capability's roles)."""
    g = d.get("clusters") if "unit" in d else d.get("clusters", d.get("n"))
    return g if isinstance(g, numbers.Integral) and not isinstance(g, bool) else None


def few_clusters(d: dict | None) -> int | None:
    """The number of clusters (else items) behind a rate_ci / paired_diff dict or a figure when it
    is below MIN_CLUSTERS, so that its interval cannot be trusted; else None."""
    if not d:
        return None
    g = units(d)
    return int(g) if g is not None and g < MIN_CLUSTERS else None


def untrusted(g: int) -> str:
    return f"(no CI: {g} cluster{'' if g == 1 else 's'}, too few to trust one)"


def fmt_rate(d: dict | None, digits: int = 1) -> str:
    """A rate with its 95% CI (stats.rate_ci; `interval`): '72.1 [68.0, 76.2]' or '-'; below
    MIN_CLUSTERS clusters (or items), the rate and why there is no interval instead."""
    if not d or d.get("rate") is None:
        return "-"
    s = f"{d['rate']:.{digits}f}"
    lo, hi = interval(d)
    if lo is not None:
        s += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    elif (g := few_clusters(d)) is not None and d.get("lo") is not None:
        s += f" {untrusted(g)}"
    return s


def fmt_stat(d: dict | None, digits: int = 2) -> str:
    """'0.42 [0.30, 0.55]' or '-' (an agreement statistic, keyed `value`)."""
    if not d or d.get("value") is None:
        return "-"
    s = f"{d['value']:.{digits}f}"
    if d.get("lo") is not None:
        s += f" [{d['lo']:.{digits}f}, {d['hi']:.{digits}f}]"
    return s


def fmt_diff(d: dict | None, digits: int = 1) -> str:
    """A paired difference with its CI: '+3.2 [-1.0, +7.5]' or '-' (below MIN_CLUSTERS: no CI)."""
    if not d or d.get("diff") is None:
        return "-"
    if (g := few_clusters(d)) is not None:
        return f"{d['diff']:+.{digits}f} {untrusted(g)}"
    return f"{d['diff']:+.{digits}f} [{d['lo']:+.{digits}f}, {d['hi']:+.{digits}f}]"


def fmt_slope(d: dict | None) -> str:
    """A slope with its CI: '+1.2 [-0.3, +2.8]' or '-'."""
    if not d:
        return "-"
    return f"{d['slope']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}]"


def fmt_pct(v: float | None) -> str:
    """A share already in percent, whole: '42%' or '-'."""
    return "-" if v is None else f"{v:.0f}%"


def fmt_in_unit(value: float | None, unit: str) -> str:
    """A run's figure in the unit of the paper's row: '72.1%', '+4.0 pp', '12', '0.884' or '-'."""
    if value is None:
        return "-"
    if unit == "cosine":
        return f"{value:.3f}"
    if unit == "count":
        return str(int(value))
    if unit in ("%", "pp"):
        return (f"{value:+.1f}" if unit == "pp" else f"{value:.1f}") + ("%" if unit == "%" else " pp")
    return f"{value:.3f}"


def fmt_mean_sd(v: float | None, sd: float | None = None, digits: int = 3) -> str:
    """A mean and, in brackets, its spread: '0.884 (0.009)' (Table 3 of RoleCapBench) or '-'."""
    if _missing(v):
        return "-"
    return f"{v:.{digits}f}" + (f" ({sd:.{digits}f})" if sd is not None else "")


def fmt_pm(pair: tuple[float | None, float | None], digits: int = 1) -> str:
    """(mean, spread) as '12.5 ± 1.3', or '-'."""
    m, s = pair
    return "-" if m is None else f"{m:.{digits}f} \u00b1 {s:.{digits}f}"


def fmt_mean_sem(c: dict | None, sem: bool = True, digits: int = 2) -> str:
    """A {mean, sem, per_repeat} cell: '66.67 ± 4.81'; one repeat has no SEM, so none is printed
    (rather than a misleading '± 0.00')."""
    if not c or c.get("mean") is None:
        return "-"
    sem = sem and len(c.get("per_repeat") or []) > 1
    return f"{c['mean']:.{digits}f}" + (f" \u00b1 {c['sem']:.{digits}f}" if sem else "")


def fmt_mean_n(d: dict | None, digits: int = 2) -> str:
    """A {mean, n} cell: '1.25 (n=40)' or '-'."""
    if not d or d.get("mean") is None:
        return "-"
    return f"{d['mean']:.{digits}f} (n={d['n']})"


# -- the headline figures of `rolebound card` (a suite's card_figures hook) ------------------------
PCT, POINTS, SCALE01 = "%", "pp", "0-1"      # rates in percent, differences in points, 0-1 scores


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


class FigureError(ValueError):
    """A figure read from metrics outside its domain (a rate of 1e308, NaN, n = -5): the metrics
    are wrong, and no figure is shown for them."""

    def __init__(self, key: str, why: str):
        super().__init__(f"{key}: {why}")
        self.key, self.why = key, why


# what a figure of each unit can be: rates in percent, differences in points, 0-1 scores and their differences
DOMAIN = {PCT: (0.0, 100.0), POINTS: (-100.0, 100.0), SCALE01: (-1.0, 1.0)}


def check_figure(key: str, unit: str, domain: tuple[float, float] | None, **values: Any) -> None:
    lo, hi = domain or DOMAIN.get(unit, (-math.inf, math.inf))
    for name, v in values.items():
        if v is None or isinstance(v, bool):
            continue
        if name == "n":
            if not isinstance(v, numbers.Integral) or v < 0:      # numpy's integers are Integral too
                raise FigureError(key, f"n is {v!r}, not a count")
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise FigureError(key, f"{name} is {str(v)[:40]!r}, not a number") from None
        a, b = (0.0, hi - lo) if name == "spread" else (lo, hi)
        if not (math.isfinite(f) and a - 1e-9 <= f <= b + 1e-9):
            raise FigureError(key, f"{name} {f:.6g} is outside [{a:g}, {b:g}] ({unit})")


def figure(key: str, label: str, value: Any, *, unit: str = PCT, lo: Any = None, hi: Any = None,
           n: int | None = None, spread: Any = None, spread_kind: str = "", why: str = "",
           note: str = "", domain: tuple[float, float] | None = None) -> dict[str, Any]:
    """One figure. `lo`/`hi`: a 95% CI (`clustered` adds the units behind it); `spread`: a +-
    value named by `spread_kind` (SEM over repeats, std across roles) where the metrics give no
    CI. A value, bound, spread or n outside the unit's domain (or `domain`) is a FigureError."""
    check_figure(key or label, unit, domain, value=value, lo=lo, hi=hi, spread=spread, n=n)
    v = _num(value)
    out: dict[str, Any] = {"key": key, "label": label, "value": v, "unit": unit, "lo": _num(lo), "hi": _num(hi),
                           "n": n, "spread": _num(spread), "spread_kind": spread_kind if _num(spread) is not None
                           else "", "note": note, "why": ""}
    if v is None:
        out.update(lo=None, hi=None, spread=None, spread_kind="",
                   why=why or "not in this run's metrics")
    return out


def clustered(f: dict[str, Any], clusters: Any) -> dict[str, Any]:
    """A figure with the number of independent units behind its CI (`clusters`): below
    MIN_CLUSTERS the CI is neither shown nor read by a claim (few_clusters, interval)."""
    if clusters is not None and f["value"] is not None:
        check_figure(f["key"] or f["label"], f["unit"], None, n=clusters)
        f["clusters"] = int(clusters)
    return f


def rate(key: str, label: str, d: dict | None, *, why: str = "", note: str = "") -> dict[str, Any]:
    """From a metrics rate_ci dict {'rate', 'lo', 'hi', 'n'} (percent, 95% bootstrap CI, clustered
    where it names its `clusters`)."""
    d = d or {}
    f = figure(key, label, d.get("rate"), lo=d.get("lo"), hi=d.get("hi"), n=d.get("n"),
               why=why or ("no questions behind it in this run" if d.get("n") == 0 else ""), note=note)
    return clustered(f, units(d))


def diff(key: str, label: str, d: dict | None, *, why: str = "", note: str = "") -> dict[str, Any]:
    """From a paired_diff dict {'diff', 'lo', 'hi', 'n'} (percentage points, 95% cluster-bootstrap CI)."""
    d = d or {}
    f = figure(key, label, d.get("diff"), unit=POINTS, lo=d.get("lo"), hi=d.get("hi"), n=d.get("n"),
               why=why, note=note)
    return clustered(f, units(d))


def chart(title: str, groups: Sequence[str], series: dict[str, Sequence[dict | None]], *,
          unit: str = PCT, ylabel: str = "") -> dict[str, Any]:
    """Grouped bars: one bar per series in each group, each bar a figure (or None: no bar);
    error bars from the figure's CI as the tables print it (`interval`: none under MIN_CLUSTERS
    clusters, the exact one at 0% or 100%) or its spread. The card draws it (rolebound.card.chart)."""
    return {"title": title, "groups": list(groups), "unit": unit, "ylabel": ylabel,
            "series": [{"label": k, "bars": [None if f is None else
                                             {"value": f["value"], "lo": interval(f)[0], "hi": interval(f)[1],
                                              "spread": f["spread"], "why": f["why"]} for f in v]}
                       for k, v in series.items()]}


def unit_digits(unit: str) -> int:
    return 3 if unit == SCALE01 else 1


def fmt_value(f: dict | None, *, sign: bool = False) -> str:
    """'72.1%', '+4.0 pp', '0.260'; '-' when missing."""
    if not f or f.get("value") is None:
        return "-"
    d = unit_digits(f["unit"])
    s = f"{f['value']:+.{d}f}" if sign or f["unit"] == POINTS else f"{f['value']:.{d}f}"
    return s + {PCT: "%", POINTS: " pp"}.get(f["unit"], "")


def fmt_figure(f: dict | None, kind: bool = True) -> str:
    """The value with its interval: '72.1% [68.0, 76.2]', '0.260 ± 0.168 (std across roles)'
    (`kind=False`: without the words in brackets), '- (why)'."""
    if not f:
        return "-"
    if f.get("value") is None:
        return f"- ({f['why']})" if f.get("why") else "-"
    d = unit_digits(f["unit"])
    s = fmt_value(f)
    lo, hi = interval(f)
    if lo is not None:
        s += f" [{lo:.{d}f}, {hi:.{d}f}]"
    elif (g := few_clusters(f)) is not None and f.get("lo") is not None:
        s += f" {untrusted(g)}"
    elif f.get("spread") is not None:
        s += f" ± {f['spread']:.{d}f}" + (f" ({f['spread_kind']})" if kind and f.get("spread_kind") else "")
    return s


# -- claims: a sentence names a direction only where the 95% CI holds it ---------------------------
# Every report and card sentence that says "leaks", "harder", "drops", "as the paper found" ...
# decides through these, so that the rule lives in one place.
def _point(f: dict) -> float | None:
    for k in ("value", "rate", "diff", "mean"):
        if f.get(k) is not None:
            return _num(f[k])
    return None


def interval(f: dict | None) -> tuple[float | None, float | None]:
    """The 95% CI of a figure or a rate_ci/paired-difference dict, as tables print it and claims
    read it (the clustered one where the metrics cluster); (None, None) where there is none. A
    bootstrap over fewer than MIN_CLUSTERS clusters is not trusted: none. A percentile bootstrap
    over outcomes that are all alike has no width ('0.0 [0.0, 0.0]' from one item); there a rate of
    0% or 100% over n independent units (its clusters, else its outcomes) gets the exact binomial
    (Clopper-Pearson) interval, which needs no size, and any other figure none."""
    if not f:
        return (None, None)
    lo, hi, v = _num(f.get("lo")), _num(f.get("hi")), _point(f)
    if lo is None or hi is None or v is None:
        return (None, None)
    if lo < hi:
        return (None, None) if few_clusters(f) is not None else (lo, hi)
    n = units(f) if units(f) is not None else f.get("n")
    if f.get("unit", PCT) == PCT and "diff" not in f and isinstance(n, int) and n > 0 and v in (0.0, 100.0):
        edge = 100.0 * 0.025 ** (1.0 / n)
        return (0.0, 100.0 - edge) if v == 0.0 else (edge, 100.0)
    return (None, None)


def side(f: dict | None, null: float = 0.0) -> int:
    """+1 where the 95% CI lies wholly above `null`, -1 wholly below, 0 where it holds `null` or
    there is no interval."""
    lo, hi = interval(f)
    if lo is None:
        return 0
    return 1 if lo > null else -1 if hi < null else 0


def order(a: dict | None, b: dict | None) -> int:
    """+1 where a's 95% CI lies wholly above b's, -1 wholly below, 0 where they overlap or either
    has none. Two intervals apart is the cautious reading of a difference: for independent figures,
    and for exclusive shares of one set (C-Gap and R-Fail), the difference's own CI is narrower."""
    (alo, ahi), (blo, bhi) = interval(a), interval(b)
    if alo is None or blo is None:
        return 0
    return 1 if alo > bhi else -1 if ahi < blo else 0


def cannot_tell(n: Any) -> str:
    return f"cannot tell at this size (n = {n if n is not None else '-'})"


def claim(direction: int, above: str, below: str, n: Any) -> str:
    """`above` where the data hold a positive direction, `below` a negative one, else 'cannot tell'."""
    return above if direction > 0 else below if direction < 0 else cannot_tell(n)
