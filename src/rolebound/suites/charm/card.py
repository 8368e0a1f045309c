"""CHARM's headline figures for `rolebound card` (Table 2 and Table 3), read from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import chart, fmt_figure, fmt_value, rate

BOUNDARIES = (("temporal", "Temporal"), ("cross", "Cross-Universe"), ("all", "All"))


def card_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    acc = metrics.get("stage_accuracy") or {}
    mat = metrics.get("matrix") or {}
    ov = metrics.get("override") or {}
    none_paired = "no BC question paired with its BA question in this run"

    def cell(boundary: str, name: str):
        m = mat.get(boundary) or {}
        return rate(f"{name}/{boundary}", name, m.get(name) if m.get("n") else None, why=none_paired)

    figs = [
        rate("ba", "BA accuracy (boundary recognised)", acc.get("ba/all"), why="no BA question answered"),
        rate("bc", "BC accuracy (abstained in character)", acc.get("bc/all"), why="no BC question answered"),
        {**cell("all", "compliance_gap"), "key": "c_gap", "label": "Compliance Gap (BA right, BC wrong)"},
        {**cell("all", "recognition_failure"), "key": "r_fail", "label": "Recognition Failure (BA wrong, BC wrong)"},
        rate("override", "verified parametric override (Cross-Universe)", ov,
             why="no Cross-Universe instance with BA right and the factual BC answer: nothing to verify",
             note=f"{ov.get('ba_pos_fc_bc_fc_kv', 0)} of {ov.get('ba_pos_fc_bc', 0)} BA+ & FC-BC instances "
                  "answered the Knowledge Verification question as the target"),
    ]
    ctl = metrics.get("override_control") or {}
    warnings = []
    if ctl:
        figs.append(rate("override_control", "verified override, KV options in the control order", ctl.get("control_order"),
                         why="no override candidate was asked in the control order",
                         note=f"the same {ctl.get('n', 0)} candidates with the factual option moved; paper order "
                              f"{fmt_value(rate('', '', ctl.get('paper_order')))}"))
        if ctl.get("outside_ci"):
            warnings.append(override_warning(ctl))
    series = {
        "BA acc": [rate("", "", acc.get(f"ba/{b}")) for b, _ in BOUNDARIES],
        "BC acc": [rate("", "", acc.get(f"bc/{b}")) for b, _ in BOUNDARIES],
        "C-Gap": [cell(b, "compliance_gap") for b, _ in BOUNDARIES],
        "R-Fail": [cell(b, "recognition_failure") for b, _ in BOUNDARIES],
    }
    return {"title": "CHARM: character knowledge boundaries", "warnings": warnings,
            "figures": figs, "finding": finding(figs, mat.get("all", {}).get("n", 0)),
            "chart": chart("BA, BC, Compliance Gap and Recognition Failure by boundary type (95% CI)",
                           [label for _, label in BOUNDARIES], series, ylabel="% (C-Gap, R-Fail: of instances)")}


def override_warning(ctl: dict) -> str:
    p, c = rate("", "", ctl.get("paper_order")), rate("", "", ctl.get("control_order"))
    same = rate("", "", ctl.get("same_position"))
    return (f"verified override is {fmt_figure(p)} with the KV options in the paper's order but {fmt_value(c)} "
            f"when the factual option is moved (outside that CI): the override figure depends on option position"
            + (f"; {fmt_value(same)} of the control answers kept the position of the paper-order answer"
               if same["value"] is not None else ""))


def finding(figs: list[dict], n: int) -> str:
    f = {x["key"]: x for x in figs}
    gap, fail, ov = f["c_gap"], f["r_fail"], f["override"]
    if gap["value"] is None or fail["value"] is None:
        return f"No Compliance Gap or Recognition Failure: {gap['why'] or fail['why']}."
    head = f"Compliance Gap of {fmt_value(gap)} against Recognition Failure of {fmt_value(fail)} ({n} instances)"
    if gap["value"] > fail["value"]:
        s = (f"{head}: hallucination is driven more by failing to comply with a recognised boundary than by "
             "failing to recognise it, as the paper found for all six of its models")
    elif gap["value"] < fail["value"]:
        s = (f"{head}: hallucination is driven more by failing to recognise the boundary than by failing to "
             "comply with it, the reverse of the paper's six models")
    else:
        s = f"{head}: compliance and recognition failures are equally frequent"
    ba = f["ba"]
    if ba["value"] is not None and ba["value"] >= 100.0:
        s += ("; every BA question's right answer is \"No\" and the model gave it every time, so a model that "
              "always says No would score the same")
    if ov["value"] is not None:
        s += (f"; {fmt_figure(ov)} of the factual answers given despite recognition are verified parametric "
              "overrides (the model knows the fact as the target character and fails to suppress it)")
    return s + "."
