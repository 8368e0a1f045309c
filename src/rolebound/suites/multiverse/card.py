"""Beyond One World headline figures for `rolebound card` (Tables 3, 6, 7, 9, 11), from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import cannot_tell, chart, claim, diff, fmt_figure, fmt_value, rate, side

CHANCE = {"canon": "25%", "dilemma": "50%"}


def card_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    strategies = metrics.get("strategies") or {}
    cross = metrics.get("cross") or {}
    figs = []
    for strat in [s for s in strategies if not s.startswith("cross-")]:
        for task in ("canon", "dilemma"):
            b = (strategies.get(strat) or {}).get(task)
            note = f"{b['labelled']} of {b['n']} with a gold answer" if b and task == "dilemma" else ""
            figs.append(rate(f"{strat}/{task}", f"{task} accuracy ({strat})", (b or {}).get("acc"),
                             why=f"no {task} question with a gold answer in this run", note=note))
    for strat, tasks in cross.items():
        for task in ("canon", "dilemma"):
            x = (tasks or {}).get(task) or {}
            figs.append(diff(f"{strat}/{task}/drop", f"cross-version drop, {task} ({x.get('base', strat)}: "
                             "in-version minus as another version)", x.get("drop"),
                             why=f"no {task} question asked of both versions in this run"))
    groups = ("canon", "dilemma")
    series = {s: [rate("", "", ((strategies.get(s) or {}).get(t) or {}).get("acc")) for t in groups]
              for s in strategies}
    return {"title": "Beyond One World (multiverse): canon events, moral dilemmas, cross-version",
            "figures": figs, "finding": finding(figs, cross),
            "chart": chart("Accuracy by task and strategy (95% CI)", groups, series, ylabel="% correct")}


def finding(figs: list[dict], cross: dict) -> str:
    f = {x["key"]: x for x in figs}
    strat = next((s for s in cross if (cross.get(s) or {}).get("canon")), None)
    canon = f.get("direct/canon") or next((x for x in figs if x["key"].endswith("/canon")), None)
    if strat is None:
        base = f"Canon accuracy {fmt_figure(canon)} (chance {CHANCE['canon']})" if canon else "No canon accuracy"
        return base + "; no cross-version strategy ran, so there is no cross-version drop."
    x = cross[strat]["canon"]
    drop = f[f"{strat}/canon/drop"]
    same, other = rate("", "", x.get("in_version")), rate("", "", x.get("cross_same_items"))
    if drop["value"] is None:
        return f"No cross-version drop: {drop['why']}."
    s = (f"Canon accuracy {fmt_value(same)} as the played version and {fmt_value(other)} when the same questions "
         f"are asked of another version of the hero (chance {CHANCE['canon']}): a cross-version drop of "
         f"{fmt_figure(drop)}")
    way = side(drop)
    s += "; " + (claim(way, "cross-version generalisation within a character is an obstacle, as the paper found",
                       "the model does better as another version, unlike the paper's models", drop["n"])
                 if way else "whether it drops as another version: " + cannot_tell(drop["n"]))
    return s + "."
