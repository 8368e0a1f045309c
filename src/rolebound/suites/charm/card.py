"""CHARM's headline figures for `rolebound card` (Table 2 and Table 3), read from metrics.json."""

from __future__ import annotations

from typing import Any

from ...report.fmt import cannot_tell, chart, claim, fmt_figure, fmt_value, order, rate, side

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
        if order(ctl.get("control_order"), ctl.get("paper_order")):
            warnings.append(override_warning(ctl))
    yc = metrics.get("ba_control") or {}
    if yc:
        figs.append(rate("ba_control", "BA Yes control: said No to in-boundary questions (answer Yes)",
                         yc.get("said_no"), why="no Yes-control question answered",
                         note=f"{yc.get('n', 0)} questions of {yc.get('roles', 0)} roles about their own era "
                              "and story; BA accuracy is the share of out-of-boundary questions answered No"))
    series = {
        "BA acc": [rate("", "", acc.get(f"ba/{b}")) for b, _ in BOUNDARIES],
        "BC acc": [rate("", "", acc.get(f"bc/{b}")) for b, _ in BOUNDARIES],
        "C-Gap": [cell(b, "compliance_gap") for b, _ in BOUNDARIES],
        "R-Fail": [cell(b, "recognition_failure") for b, _ in BOUNDARIES],
    }
    return {"title": "CHARM: character knowledge boundaries", "warnings": warnings,
            "figures": figs, "finding": finding(figs, mat.get("all", {}).get("n", 0), yc),
            "chart": chart("BA, BC, Compliance Gap and Recognition Failure by boundary type (95% CI)",
                           [label for _, label in BOUNDARIES], series, ylabel="% (C-Gap, R-Fail: of instances)")}


def override_warning(ctl: dict) -> str:
    p, c = rate("", "", ctl.get("paper_order")), rate("", "", ctl.get("control_order"))
    same = rate("", "", ctl.get("same_position"))
    return (f"verified override is {fmt_figure(p)} with the KV options in the paper's order but {fmt_figure(c)} "
            f"when the factual option is moved (the two intervals apart): the override figure depends on option "
            "position" + (f"; {fmt_value(same)} of the control answers kept the position of the paper-order answer"
                          if same["value"] is not None else ""))


def position_claim(ctl: dict) -> str:
    """Whether the override figure depends on option position: said only where the paired
    difference's CI (clustered) excludes none, else (older metrics) where the two CIs are apart."""
    if ctl.get("paired"):
        if side(ctl["paired"]):
            return ("The paired difference's 95% CI lies wholly on one side of zero: the override figure "
                    "depends on the option position")
        return "Whether the override figure depends on position: " + cannot_tell(ctl.get("n"))
    if order(ctl.get("control_order"), ctl.get("paper_order")):
        return "The control order's 95% CI lies apart from the paper order's: the override figure depends on position"
    return "Whether the override figure depends on position: " + cannot_tell(ctl.get("n"))


def yes_control_text(yc: dict) -> str:
    """'says No to 92.0% [..] of the 20 ...: BA here measures a No-bias' where the CI holds it."""
    no = rate("", "", yc.get("said_no"))
    head = (f"says No to {fmt_figure(no)} of the {yc.get('n', 0)} in-boundary questions whose answer is Yes "
            "(what the character knows)")
    return head + ": " + claim(side(no, 50.0), "BA here measures a No-bias",
                               "it says Yes to most of what the character knows, so its BA answers are not a "
                               "blanket No", yc.get("n"))


def finding(figs: list[dict], n: int, yc: dict | None = None) -> str:
    f = {x["key"]: x for x in figs}
    gap, fail, ov = f["c_gap"], f["r_fail"], f["override"]
    if gap["value"] is None or fail["value"] is None:
        return f"No Compliance Gap or Recognition Failure: {gap['why'] or fail['why']}."
    head = f"Compliance Gap of {fmt_value(gap)} against Recognition Failure of {fmt_value(fail)} ({n} instances)"
    which = order(gap, fail)
    s = head + ": " + (claim(
        which,
        "hallucination is driven more by failing to comply with a recognised boundary than by failing to "
        "recognise it, as the paper found for all six of its models",
        "hallucination is driven more by failing to recognise the boundary than by failing to comply with it, "
        "the reverse of the paper's six models", n) if which else "which of the two drives hallucination: "
                                                                  + cannot_tell(n))
    ba = f["ba"]
    if ba["value"] is not None and ba["value"] >= 100.0:
        s += ("; every BA question's right answer is \"No\" and the model gave it every time, so a model that "
              "always says No would score the same")
    if yc:
        s += "; asked about what its character does know, the model " + yes_control_text(yc)
    if ov["value"] is not None:
        s += (f"; {fmt_figure(ov)} of the factual answers given despite recognition are verified parametric "
              "overrides (the model knows the fact as the target character and fails to suppress it)")
    return s + "."
