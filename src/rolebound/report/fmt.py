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
from typing import Any, Sequence


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_num(v: float | None, digits: int = 2) -> str:
    """'0.42' or '-'."""
    return "-" if _missing(v) else f"{v:.{digits}f}"


MIN_CLUSTERS = 10      # stats.MIN_CLUSTERS (fmt imports nothing of ours; tests/test_parsers_stats.py ties them)


def few_clusters(d: dict | None) -> int | None:
    """The number of clusters (else items) behind a rate_ci / paired_diff dict when it is below
    MIN_CLUSTERS, so that its interval cannot be trusted; else None."""
    if not d:
        return None
    g = d.get("clusters", d.get("n"))
    return g if isinstance(g, int) and g < MIN_CLUSTERS else None


def untrusted(g: int) -> str:
    return f"(no CI: {g} cluster{'' if g == 1 else 's'}, too few to trust one)"


def fmt_rate(d: dict | None, digits: int = 1) -> str:
    """A rate with its bootstrap CI (stats.rate_ci): '72.1 [68.0, 76.2]' or '-'; below
    MIN_CLUSTERS clusters (or items), the rate and why there is no interval instead."""
    if not d or d.get("rate") is None:
        return "-"
    s = f"{d['rate']:.{digits}f}"
    if (g := few_clusters(d)) is not None and d.get("lo") is not None:
        return f"{s} {untrusted(g)}"
    if d.get("lo") is not None:
        s += f" [{d['lo']:.{digits}f}, {d['hi']:.{digits}f}]"
    return s


def fmt_stat(d: dict | None, digits: int = 2) -> str:
    """'0.42 [0.30, 0.55]' or '-' (an agreement statistic: fmt_rate's format, keyed `value`)."""
    return fmt_rate({**d, "rate": d.get("value")} if d else None, digits)


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


def figure(key: str, label: str, value: Any, *, unit: str = PCT, lo: Any = None, hi: Any = None,
           n: int | None = None, spread: Any = None, spread_kind: str = "", why: str = "",
           note: str = "") -> dict[str, Any]:
    """One figure. `lo`/`hi`: a 95% CI; `spread`: a +- value named by `spread_kind` (SEM over
    repeats, std across roles) where the metrics give no CI."""
    v = _num(value)
    out: dict[str, Any] = {"key": key, "label": label, "value": v, "unit": unit, "lo": _num(lo), "hi": _num(hi),
                           "n": n, "spread": _num(spread), "spread_kind": spread_kind if _num(spread) is not None
                           else "", "note": note, "why": ""}
    if v is None:
        out.update(lo=None, hi=None, spread=None, spread_kind="",
                   why=why or "not in this run's metrics")
    return out


def rate(key: str, label: str, d: dict | None, *, why: str = "", note: str = "") -> dict[str, Any]:
    """From a metrics rate_ci dict {'rate', 'lo', 'hi', 'n'} (percent, 95% bootstrap CI)."""
    d = d or {}
    return figure(key, label, d.get("rate"), lo=d.get("lo"), hi=d.get("hi"), n=d.get("n"),
                  why=why or ("no questions behind it in this run" if d.get("n") == 0 else ""), note=note)


def diff(key: str, label: str, d: dict | None, *, why: str = "", note: str = "") -> dict[str, Any]:
    """From a paired_diff dict {'diff', 'lo', 'hi', 'n'} (percentage points, 95% bootstrap CI)."""
    d = d or {}
    return figure(key, label, d.get("diff"), unit=POINTS, lo=d.get("lo"), hi=d.get("hi"), n=d.get("n"),
                  why=why, note=note)


def chart(title: str, groups: Sequence[str], series: dict[str, Sequence[dict | None]], *,
          unit: str = PCT, ylabel: str = "") -> dict[str, Any]:
    """Grouped bars: one bar per series in each group, each bar a figure (or None: no bar);
    error bars from the figure's CI or spread. The card draws it (rolebound.card.chart)."""
    return {"title": title, "groups": list(groups), "unit": unit, "ylabel": ylabel,
            "series": [{"label": k, "bars": [None if f is None else
                                             {"value": f["value"], "lo": f["lo"], "hi": f["hi"],
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
    if f.get("lo") is not None and f.get("hi") is not None:
        s += f" [{f['lo']:.{d}f}, {f['hi']:.{d}f}]"
    elif f.get("spread") is not None:
        s += f" ± {f['spread']:.{d}f}" + (f" ({f['spread_kind']})" if kind and f.get("spread_kind") else "")
    return s
