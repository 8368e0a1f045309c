"""The headline figures a suite declares for `rolebound card` (its `card_figures(metrics)` hook).

Plain JSON-able dicts, so card.json holds exactly what the page shows. A figure whose value is
None carries `why` (shown as "-" with the reason, never as 0). Pure: no plotting, no I/O.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

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


def digits(unit: str) -> int:
    return 3 if unit == SCALE01 else 1


def fmt_value(f: dict | None, *, sign: bool = False) -> str:
    """'72.1%', '+4.0 pp', '0.260'; '-' when missing."""
    if not f or f.get("value") is None:
        return "-"
    d = digits(f["unit"])
    s = f"{f['value']:+.{d}f}" if sign or f["unit"] == POINTS else f"{f['value']:.{d}f}"
    return s + {PCT: "%", POINTS: " pp"}.get(f["unit"], "")


def fmt(f: dict | None, kind: bool = True) -> str:
    """The value with its interval: '72.1% [68.0, 76.2]', '0.260 ± 0.168 (std across roles)'
    (`kind=False`: without the words in brackets), '- (why)'."""
    if not f:
        return "-"
    if f.get("value") is None:
        return f"- ({f['why']})" if f.get("why") else "-"
    d = digits(f["unit"])
    s = fmt_value(f)
    if f.get("lo") is not None and f.get("hi") is not None:
        s += f" [{f['lo']:.{d}f}, {f['hi']:.{d}f}]"
    elif f.get("spread") is not None:
        s += f" ± {f['spread']:.{d}f}" + (f" ({f['spread_kind']})" if kind and f.get("spread_kind") else "")
    return s


def by_key(figs: Sequence[dict]) -> dict[str, dict]:
    return {f["key"]: f for f in figs}
