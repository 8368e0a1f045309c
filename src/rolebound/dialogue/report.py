"""The dialogue sections of a run's report, the drift figure, and the card's drift figures."""

from __future__ import annotations

from typing import Any

from ..report.builder import drawing, png as figure_png
from ..report.fmt import few_clusters, fmt_diff, fmt_rate, fmt_slope, interval, untrusted

COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def slope(d: dict | None) -> str:
    """The drift slope with its CI, or without one under 10 clusters."""
    if d and (g := few_clusters(d)) is not None:
        return f"{d['slope']:+.1f} {untrusted(g)}"
    return fmt_slope(d)


def table_rows(m: dict) -> list[list[Any]]:
    """Per metric: depth 0 once (no warm-up: shared by every kind), then each kind's deeper rows
    and its drift slope."""
    rows = []
    for name in m.get("names", []):
        by_kind = m["metrics"].get(name) or {}
        zero = next((r for s in by_kind.values() for r in s["rows"] if r["depth"] == 0), None)
        if zero is not None:
            rows.append([name, "none (single turn)", 0, fmt_rate(zero), zero["n"], zero.get("clusters", ""), "", ""])
        for kind, s in by_kind.items():
            if not any(r["depth"] for r in s["rows"]):
                continue            # depth 0 only (a run stopped before any warm-up): no drift to give
            for row in s["rows"]:
                if row["depth"]:
                    rows.append([name, kind, row["depth"], fmt_rate(row), row["n"], row.get("clusters", ""),
                                 fmt_diff(row.get("change")), ""])
            d = s.get("drift") or {}
            rows.append([name, kind, "drift", "", d.get("n", ""), d.get("clusters", ""), "", slope(s.get("drift"))])
    return rows


def figure(m: dict):
    """Each headline metric against depth, one line per warm-up kind, 95% CI as error bars."""
    from ..report.builder import subplots

    names = [n for n in m.get("names", []) if m["metrics"].get(n)]
    fig, axes = subplots(1, max(1, len(names)), figsize=(3.2 * max(1, len(names)) + 0.8, 3.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        for i, (kind, s) in enumerate(m["metrics"][name].items()):
            rows = [r for r in s["rows"] if r.get("rate") is not None]
            x = [r["depth"] + 0.08 * i for r in rows]
            y = [r["rate"] for r in rows]
            ax.plot(x, y, marker="o", label=kind, color=COLORS[i % len(COLORS)])
            # a bar only where the table prints a CI (none under 10 clusters)
            for xv, r in zip(x, rows):
                lo, hi = interval(r)
                if lo is not None and hi > lo:
                    ax.errorbar([xv], [r["rate"]], yerr=[[max(0.0, r["rate"] - lo)], [max(0.0, hi - r["rate"])]],
                                fmt="none", capsize=3, ecolor=COLORS[i % len(COLORS)])
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("earlier exchanges (depth)")
        ax.set_xticks(m.get("depths", []))
        ax.set_ylim(-3, 103)
    axes[0][0].set_ylabel("% (95% CI)")
    if names:
        axes[0][-1].legend(title="warm-up", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def png(m: dict) -> bytes:
    return figure_png(drawing(figure, m), dpi=100)


def add_sections(rep, m: dict) -> None:
    """The depth table and the drift figure (nothing when the run has no dialogue probes)."""
    if not m:
        return
    t = m.get("turns", {})
    rep.text(f"Each probe was asked after 0 to {max(m['depths'])} earlier exchanges in the same chat "
             f"(warm-up: {', '.join(m['warmups'])}); {m['probes']} probe answers, {t.get('calls', 0)} warm-up "
             f"turns in {t.get('dialogues', 0)} dialogues ({t.get('completion_tokens', 0)} reply tokens), "
             f"{t.get('user_calls', 0)} simulated-user messages. Depth 0 is the single-turn prompt. "
             "Change: paired over the same items as depth 0; drift: least-squares slope in points per "
             "4 turns over the items asked at every depth (docs/dialogue.md).", title="Dialogue: boundaries by depth")
    rep.table("Headline figures by dialogue depth (%, 95% cluster-bootstrap CI)",
              ["metric", "warm-up", "depth", "rate [CI]", "n", "clusters", "change from depth 0 [CI]",
               "drift per 4 turns [CI]"], table_rows(m),
              note=f"Every CI, change and drift resamples clusters: the {m.get('cluster_by', 'item')}. Under 10 "
                   "clusters no CI is printed: it could not be trusted.")
    rep.figure("Drift: metric against depth, one line per warm-up kind", drawing(figure, m), name="dialogue_drift")


def summary_lines(m: dict | None) -> list[tuple[str, str]]:
    """End-of-run lines: each metric's rate by depth and its drift, per warm-up kind."""
    out = []
    for name in (m or {}).get("names", []):
        for kind, s in ((m or {})["metrics"].get(name) or {}).items():
            by = ", ".join(f"{r['depth']}: {fmt_rate(r, 1).split(' ')[0]}" for r in s["rows"])
            out.append((f"{name} by depth ({kind})", f"{by}; drift {slope(s.get('drift'))} per 4 turns"))
    return out
