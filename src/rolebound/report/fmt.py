"""The number formats of every report table and summary line: one place, '-' for a missing value.

Two formats live elsewhere because they read a domain value, not a number: a card figure's
(card/figures.py's fmt/fmt_value: its unit and interval, beside the figure they format, which
imports nothing of ours) and a paper row's (papers.fmt_paper: the decimals the paper printed)."""

from __future__ import annotations

import math
from typing import Any


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_num(v: float | None, digits: int = 2) -> str:
    """'0.42' or '-'."""
    return "-" if _missing(v) else f"{v:.{digits}f}"


def fmt_rate(d: dict | None, digits: int = 1) -> str:
    """A rate with its bootstrap CI (stats.rate_ci): '72.1 [68.0, 76.2]' or '-'."""
    if not d or d.get("rate") is None:
        return "-"
    s = f"{d['rate']:.{digits}f}"
    if d.get("lo") is not None:
        s += f" [{d['lo']:.{digits}f}, {d['hi']:.{digits}f}]"
    return s


def fmt_stat(d: dict | None, digits: int = 2) -> str:
    """'0.42 [0.30, 0.55]' or '-' (an agreement statistic: fmt_rate's format, keyed `value`)."""
    return fmt_rate({**d, "rate": d.get("value")} if d else None, digits)


def fmt_diff(d: dict | None, digits: int = 1) -> str:
    """A paired difference with its CI: '+3.2 [-1.0, +7.5]' or '-'."""
    if not d:
        return "-"
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
