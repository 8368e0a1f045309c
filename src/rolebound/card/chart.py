"""One grouped bar chart per suite (a matplotlib Figure; the card renders its PNG) from a rolebound.report.fmt.chart spec.
A missing value gets no bar and an "n/a" mark, never a bar of height 0."""

from __future__ import annotations

from typing import Any

from ..report.fmt import PCT, POINTS, SCALE01, unit_digits

COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def draw(spec: dict[str, Any]):
    """The chart as a matplotlib Figure (rolebound.report.builder.png renders and caches it)."""
    from ..report.builder import subplots
    import numpy as np

    groups, series = spec["groups"], spec["series"]
    k = max(1, len(series))
    width = 0.8 / k
    x = np.arange(len(groups))
    fig, ax = subplots(figsize=(min(8.5, max(5.0, 0.45 * k * len(groups) + 2.5)), 3.6))   # fits the card
    top = {PCT: 100.0, SCALE01: 1.0}.get(spec.get("unit"))
    digits = unit_digits(spec.get("unit", PCT))
    highest = 0.0
    for i, s in enumerate(series):
        pos = x - 0.4 + width * (i + 0.5)
        for j, b in enumerate(s["bars"]):
            if b is None:
                continue
            if b.get("value") is None:
                ax.text(pos[j], 0, "n/a", ha="center", va="bottom", fontsize=8, color="#777", rotation=90)
                continue
            v = b["value"]
            # an interval of no width draws no bar (a cap on the bar's top would read as a CI)
            if b.get("lo") is not None and b.get("hi") is not None and b["hi"] > b["lo"]:
                err = [[max(0.0, v - b["lo"])], [max(0.0, b["hi"] - v)]]
            elif b.get("spread"):
                err = [[b["spread"]], [b["spread"]]]
            else:
                err = None
            ax.bar(pos[j], v, width, yerr=err, capsize=3, color=COLORS[i % len(COLORS)],
                   label=s["label"] if j == next(n for n, bb in enumerate(s["bars"]) if bb and bb.get("value")
                                                 is not None) else None)
            # the value above its error bar, upright text turned on its side so neighbours never
            # collide (a real 0 reads as 0; a missing one says n/a)
            above = max(v, v + (err[1][0] if err else 0.0), 0.0)
            highest = max(highest, above)
            ax.text(pos[j], above, " " + f"{v:.{digits}f}", ha="center", va="bottom", fontsize=8,
                    color="#333", rotation=90)
    ax.set_xticks(x, groups)
    if top is not None:                 # room above the bars for their values
        ax.set_ylim(0, max(top, highest) * 1.3)
        ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top])
    else:
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.3 * (hi - lo))
    if spec.get("unit") == POINTS:
        ax.axhline(0, color="#333", linewidth=0.8)
    ax.set_ylabel(spec.get("ylabel") or spec.get("unit") or "")
    ax.set_title(spec.get("title") or "", fontsize=10)
    if any(s["bars"] and any(b and b.get("value") is not None for b in s["bars"]) for s in series):
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
