"""RoleCapBench headline figures for `rolebound card` (Table 3 and the Injection effect), from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import SCALE01, chart, figure, fmt_value
from .metrics import METRICS

WHY = {"TA": "no answers of this variant in this run",
       "IA": "no role has questions at or below its ceiling in this run",
       "A": "no role has questions above its ceiling in this run"}
NAMES = {"TA": "total accuracy TA", "IA": "in-role accuracy IA", "A": "above-role accuracy A"}


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
            "figures": figs, "finding": finding(f),
            "chart": chart("TA, IA and A by prompt variant (bars: std across roles)", list(METRICS), series,
                           unit=SCALE01, ylabel="accuracy (0-1)")}


def finding(f: dict[str, dict]) -> str:
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
    s = (f"Prompted as a role ({base}), the model keeps an above-role accuracy A of {fmt_value(a)} "
         f"(in-role IA {fmt_value(ia)}): ")
    s += ("its capability leaks past the role, as the paper found (A 0.811-0.898 under naive role prompting)"
          if a["value"] > 0 else "no capability leaks past the role here")
    eff_a, eff_ia = f.get("injection/effect/A"), f.get("injection/effect/IA")
    if eff_a and eff_a["value"] is not None:
        s += (f"; Injection changes A by {fmt_value(eff_a, sign=True)} and IA by {fmt_value(eff_ia, sign=True)} "
              "(the paper: A down by up to 0.562, IA down by less than 0.058 for most models)")
    return s + "."
