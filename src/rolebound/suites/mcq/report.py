"""The mcq suite's report: the accuracy table and the per-sample answers."""

from __future__ import annotations

from ...report.builder import Report
from ...report.fmt import fmt_rate


def report_sections(metrics, records, manifest, run_dir) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    rep = Report(f"MCQ run: {manifest.dataset}")
    rows, groups = [], []
    for strat, m in metrics["by_strategy"].items():
        rows.append([strat, m["n"], fmt_rate(m), m.get("clusters", m["n"]), m["invalid"]])
        groups += [[strat, g, d["n"], fmt_rate(d), d.get("clusters", d["n"])] for g, d in (m.get("by_group") or {}).items()]
    note = ("CIs resample clusters as the headline table: the item (its --repeats share one). Under 10 clusters no "
            "CI is printed: it could not be trusted.")
    rep.table("Accuracy (%, 95% cluster-bootstrap CI)", ["strategy", "n", "acc [95% CI]", "clusters", "invalid"], rows,
              note=note)
    if groups:
        rep.table("Accuracy by group (--set group)", ["strategy", "group", "n", "acc [95% CI]", "clusters"], groups,
                  note=note)
    samples = [{"_call": r.call_id, "id": r.item_id, "strategy": r.strategy, "gold": r.gold, "parsed": r.parsed,
                "correct": r.correct, "response": r.response} for r in records if r.stage == "answer"]
    rep.samples("Per-sample answers", ["id", "strategy", "gold", "parsed", "correct", "response"],
                samples, ["strategy", "correct"], shown=["question", "id", "strategy", "gold", "parsed"])
    return rep
