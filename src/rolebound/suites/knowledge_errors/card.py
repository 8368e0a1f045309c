"""Knowledge-errors headline figures for `rolebound card` (Tables 2-3), read from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import cannot_tell, chart, claim, clustered, figure, fmt_value, order
from .metrics import CATEGORIES, ERROR_TYPES


def _cell(key: str, label: str, c: dict | None, why: str) -> dict:
    c = c or {}
    reps = len(c.get("per_repeat") or [])
    return figure(key, label, c.get("mean"), n=c.get("n"), spread=c.get("sem") if reps > 1 else None,
                  spread_kind=f"SEM over {reps} repeats", why=why)


def card_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    acc = metrics.get("accuracy") or {}
    strat = next(iter(acc), None)
    a = acc.get(strat) or {}
    why = "no judged answer of this memory type in this run"
    figs = []
    for et in ERROR_TYPES:
        figs.append(_cell(f"{et}/all", f"{et} accuracy (all memory types)", (a.get(et) or {}).get("all"), why))
        figs += [_cell(f"{et}/{c}", f"{et} accuracy: {c} memories", (a.get(et) or {}).get(c), why)
                 for c in CATEGORIES]
    j = a.get("judgments") or {}
    figs.append(figure("judge_invalid", "unreadable judgments (counted as not detected)",
                       100.0 * j["invalid"] / j["answers"] if j.get("answers") else None, n=j.get("answers"),
                       why="no answers judged"))
    series = {et: [next(f for f in figs if f["key"] == f"{et}/{c}") for c in CATEGORIES] for et in ERROR_TYPES}
    return {"title": "Knowledge errors: known (KKE) and unknown (UKE) character knowledge errors",
            "strategy": strat, "figures": figs, "finding": finding(figs, strat, a),
            "chart": chart(f"Detection accuracy by memory type ({strat or '-'})", list(CATEGORIES), series,
                           ylabel="% of answers judged to detect the error")}


def _ci(cell: dict | None) -> dict:
    """A cell with its 95% CI (pooled bootstrap over the judged answers' clusters), as the claims read it."""
    c = cell or {}
    return clustered(figure("", "", c.get("mean"), lo=c.get("lo"), hi=c.get("hi"), n=c.get("n")), c.get("clusters"))


def finding(figs: list[dict], strat: str | None, acc: dict | None = None) -> str:
    f = {x["key"]: x for x in figs}
    acc = acc or {}
    kke, uke = f["KKE/all"], f["UKE/all"]
    if kke["value"] is None or uke["value"] is None:
        return f"No detection accuracy: {kke['why'] or uke['why']}."
    head = f"With {strat}, the model detects {fmt_value(kke)} of known-knowledge errors (KKE) and {fmt_value(uke)} of unknown ones (UKE)"
    ci = {et: _ci((acc.get(et) or {}).get("all")) for et in ERROR_TYPES}
    which = order(ci["UKE"], ci["KKE"])
    n = f"KKE {kke['n']}, UKE {uke['n']}"
    s = head + ": " + (claim(which, "errors in what the character knows are the harder to catch, as the paper found "
                                    "(KKE is more elusive)",
                             "unlike the paper, where KKE was the harder type, here errors beyond the character's "
                             "knowledge are missed more", n) if which else
                       "which type is the harder one: " + cannot_tell(n) + " (the paper found KKE more elusive)")
    cells = sorted(((x, _ci((acc.get(x["key"].split("/")[0]) or {}).get(x["key"].split("/")[1])))
                    for x in figs if "/" in x["key"] and not x["key"].endswith("/all") and x["value"] is not None),
                   key=lambda p: p[0]["value"])
    if len(cells) > 1 and order(cells[0][1], cells[1][1]) < 0:     # the lowest, apart from every other
        worst = cells[0][0]
        s += f"; the weakest cell is {worst['label'].replace(' accuracy:', ',')} at {fmt_value(worst)}"
    return s + "."
