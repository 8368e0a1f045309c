"""RoleCapBench headline figures for `rolebound card` (Table 3 and the Injection effect), from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import SCALE01, cannot_tell, chart, claim, figure, fmt_figure, fmt_value, side
from .metrics import METRICS

WHY = {"TA": "no answers of this variant in this run",
       "IA": "no role has questions at or below its ceiling in this run",
       "A": "no role has questions above its ceiling in this run"}
NAMES = {"TA": "total accuracy TA", "IA": "in-role accuracy IA", "A": "above-role accuracy A"}
CHANCE = 0.25       # four options, A-D: what a role that only guesses scores


def _macro(strat: str, k: str, m: dict | None) -> dict:
    mac = ((m or {}).get("macro") or {}).get(k) or {}
    return figure(f"{strat}/{k}", f"{NAMES[k]} ({strat})", mac.get("mean"), unit=SCALE01, n=mac.get("n_roles"),
                  spread=mac.get("std"), spread_kind="std across roles", why=WHY[k])


def card_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    by = metrics.get("by_strategy") or {}
    figs = []
    for strat, m in by.items():
        figs += [_macro(strat, k, m) for k in METRICS]
        o = m.get("outcomes") or {}
        figs.append(figure(f"{strat}/valid", f"answers with a valid \\boxed{{}} ({strat})",
                           100.0 * o["valid"] / o["total"] if o.get("total") else None, n=o.get("total"),
                           why=WHY["TA"]))
    for strat, d in (metrics.get("deltas") or {}).items():
        for k in ("IA", "A"):
            figs.append(figure(f"{strat}/effect/{k}", f"{strat.capitalize()} effect on {k} ({strat} minus identity)",
                               d.get(k), unit=SCALE01,
                               why=f"{k} is undefined for {strat} or identity in this run"))
    nr = metrics.get("no_role")
    if nr:
        figs.append(figure("no-role/TA", "total accuracy TA (no role, baseline)", nr.get("TA"), unit=SCALE01,
                           n=nr.get("n"), why=WHY["TA"]))
    f = {x["key"]: x for x in figs}
    series = {s: [f.get(f"{s}/{k}") for k in METRICS] for s in by}
    if nr:
        series["no-role"] = [f["no-role/TA"], None, None]
    return {"title": "RoleCapBench (capability): role-capability leakage",
            "figures": figs, "finding": finding(f, by),
            "chart": chart("TA, IA and A by prompt variant (bars: std across roles)", list(METRICS), series,
                           unit=SCALE01, ylabel="accuracy (0-1)")}


def _interval_of(by: dict, strat: str, k: str) -> dict:
    """The macro figure with its question-bootstrap 95% CI (metrics.macro_ci), as the claims read it."""
    mac = (((by.get(strat) or {}).get("macro") or {}).get(k)) or {}
    return figure("", "", mac.get("mean"), unit=SCALE01, lo=mac.get("lo"), hi=mac.get("hi"), n=mac.get("n_roles"))


def finding(f: dict[str, dict], by: dict | None = None) -> str:
    by = by or {}
    base = "identity" if "identity/A" in f else next((k.split("/")[0] for k in f if k.endswith("/A")), None)
    if base is None:
        return "No role-prompted variant ran, so there is no capability-leakage figure."
    valid = f.get(f"{base}/valid")
    if valid and valid["value"] == 0:
        return (f"None of the {base} answers holds a valid \\boxed{{}} answer, so every accuracy is 0: "
                "these figures measure the answer format, not role-capability leakage.")
    a, ia = f[f"{base}/A"], f[f"{base}/IA"]
    if a["value"] is None:
        return f"No above-role accuracy: {a['why']}."
    per_role = (by.get(base) or {}).get("per_role") or {}
    above = sum(r.get("n_above") or 0 for r in per_role.values())
    size = f"{above} answers above the ceiling, {a['n']} roles" if above else a["n"]
    ci = _interval_of(by, base, "A")
    s = (f"Prompted as a role ({base}), the model keeps an above-role accuracy A of {fmt_figure(ci, kind=False)} "
         f"(in-role IA {fmt_value(ia)}; a guess scores {CHANCE:.2f}): ")
    leak = side(ci, CHANCE)
    s += claim(leak, "above chance, so its capability leaks past the role, as the paper found (A 0.811-0.898 under "
                     "naive role prompting)",
               "below chance, so the role holds back what lies above its ceiling", size) if leak else \
        "whether its capability leaks past the role: " + cannot_tell(size)
    eff_a, eff_ia = f.get("injection/effect/A"), f.get("injection/effect/IA")
    if eff_a and eff_a["value"] is not None:
        s += (f"; Injection minus identity is {fmt_value(eff_a, sign=True)} on A and {fmt_value(eff_ia, sign=True)} on "
              "IA, " + claim(side(eff_a), "so Injection raises A", "so Injection lowers A", a["n"])
              + " (the paper: A down by up to 0.562, IA down by less than 0.058 for most models)")
    return s + "."
