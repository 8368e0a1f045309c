"""Run-level report sections about how far a run's figures can be trusted: the paper's figures
beside the run's (with the protocol comparison), position bias of the multiple-choice answers, and
accuracy under shifted option orders. Built from metrics.json and the manifest alone."""

from __future__ import annotations

from .report.fmt import fmt_in_unit, fmt_pct


def run_level(rep, metrics: dict, manifest) -> None:
    """Into a suite's report: a position-bias warning among the facts; the paper beside the run
    and the position-bias table before the suite's sections; the shifts table after them."""
    warnings = (metrics.get("position_bias") or {}).get("warnings") or []
    if warnings:
        rep.meta.append(("position bias", "WARNING: " + "; ".join(warnings)))
    suite_sections, rep.sections = rep.sections, []
    paper_sections(rep, metrics, manifest)
    position_sections(rep, metrics)
    rep.sections += suite_sections
    shift_sections(rep, metrics)


def paper_sections(rep, metrics: dict, manifest) -> None:
    """The 'paper beside this run' table, with the protocol comparison."""
    from . import reference
    from .suites import get_suite

    try:
        suite = get_suite(manifest.suite)
    except Exception:  # noqa: BLE001 - an unknown suite (plugin gone) has no reference rows
        return
    try:
        figs = (suite.card_figures(metrics) or {}).get("figures") or []
    except Exception:  # noqa: BLE001 - a metrics.json from other code: paths still resolve
        figs = []
    entries = reference.beside(suite, metrics, manifest, figs)
    text = reference.protocol_text(suite, manifest)
    if suite.protocol is not None:      # suites with no paper (mcq) say nothing
        rep.meta.append(("against the paper", text))
    if not entries:
        return
    rows = [[e["label"], fmt_in_unit(e["value"], e["unit"]), e["paper"]] for e in entries]
    first = reference.rows_for(suite)[0]
    rep.table("The paper's figures beside this run", ["figure", "this run", "paper (model value, table)"], rows,
              note=f"{text} The paper's values ({first.paper}) were produced under: {first.protocol}. They are "
                   "copied from its tables (the suite's data/paper_results.yaml, checked against the paper's text); "
                   "0-1 scores are shown in percent beside a percent figure; rows for the strategies this run ran.")


def position_sections(rep, metrics: dict) -> None:
    pb = metrics.get("position_bias") or {}
    stages = pb.get("stages") or {}
    if not stages:
        return
    rows = []
    for stage, b in stages.items():
        for i, lab in enumerate(b["labels"]):
            rows.append([stage, f"{i + 1} ({lab})", fmt_pct(b["pick_share"][i]), fmt_pct(b["gold_share"][i]),
                         b["picks"][i], b["golds"][i]])
    tests = "; ".join(f"{s}: chi2 {b['chi2']:.1f}, dof {b['dof']}, p {b['p']:.2g}" if b.get("p") is not None
                      else f"{s}: no test (one position only)" for s, b in stages.items())
    if pb.get("warnings"):
        rep.text("\n\n".join("Warning: " + w + "." for w in pb["warnings"]), title="Position bias warning")
    rep.table("Position bias: answers and gold answers by option position",
              ["stage", "position (label)", "answers", "gold", "answers n", "gold n"], rows,
              note=f"Chi-square test of homogeneity (answers vs gold over positions): {tests}. "
                   f"Rule: {pb.get('rule', '')}. Paper-order calls only; invalid answers left out.")


def shift_sections(rep, metrics: dict) -> None:
    sh = metrics.get("shifts") or {}
    if not sh:
        return
    rows = []
    for stage, d in sh.items():
        accs = [d["accuracy"][str(k)] for k in range(d["shifts"])]
        rows.append([stage, d["items"]] + [_one(a) for a in accs] + [_one(d["consistency"])])
    k = max(d["shifts"] for d in sh.values())
    heads = ["stage", "items"] + ["paper order" if s == 0 else f"shift {s}" for s in range(k)] + ["consistency"]
    rows = [r + ["-"] * (len(heads) - len(r)) for r in rows]
    rep.table("Accuracy under cyclic shifts of the options (--set permutations)", heads, rows,
              note="Each item asked with its options shifted cyclically (shift s: the option at position i moves "
                   "to i+s). Consistency: the share of items whose chosen option, by content, is the same under "
                   "every shift. The paper's figure is the paper-order column; items asked under every shift only.")


def _one(d: dict | None) -> str:
    if not d or d.get("rate") is None:
        return "-"
    return f"{d['rate']:.1f}% [{d['lo']:.1f}, {d['hi']:.1f}]" if d.get("lo") is not None else f"{d['rate']:.1f}%"
