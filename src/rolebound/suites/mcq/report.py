"""The mcq suite's report: the accuracy table and the per-sample answers."""

from __future__ import annotations

from ...report.builder import Report


def report_sections(metrics, records, manifest, run_dir) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    rep = Report(f"MCQ run: {manifest.dataset}")
    rows = []
    for strat, m in metrics["by_strategy"].items():
        rows.append([strat, m["n"], m["rate"], m["lo"], m["hi"], m["invalid"]])
    rep.table("Accuracy (%, 95% bootstrap CI)", ["strategy", "n", "acc", "CI low", "CI high", "invalid"], rows)
    samples = [{"_call": r.call_id, "id": r.item_id, "strategy": r.strategy, "gold": r.gold, "parsed": r.parsed,
                "correct": r.correct, "response": r.response} for r in records if r.stage == "answer"]
    rep.samples("Per-sample answers", ["id", "strategy", "gold", "parsed", "correct", "response"],
                samples, ["strategy", "correct"], shown=["question", "id", "strategy", "gold", "parsed"])
    return rep
