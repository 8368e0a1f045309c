"""A run's report. `build(run_dir)` is the one path from a run's records to its report: the
run's own report (api.run) and `rolebound report RUN` both call it. Its parts: run.py (the
run-level figures, facts and sections, and the order of the whole report), papers.py (the papers'
figures beside the run's), builder.py (Report: sections -> report.md + report.html), fmt.py,
figures.py, samples.py."""

from __future__ import annotations

from pathlib import Path


def build(run_dir: str | Path, suite=None) -> tuple[dict, list[Path]]:
    """metrics.json, report.md and report.html of a suite's run, from records.jsonl alone: the
    suite computes its metrics and returns its part of the report (a Report: title, its facts
    and sections), and run.assemble puts the run-level sections around it. A suite whose report
    hook wrote its own files returns their paths instead. `suite`: the run's suite where the
    caller has it (api.run, api.build_report), else looked up from the manifest. The caller
    holds the run's lock."""
    from ..records import canonical_order
    from ..scoring import model_extract
    from ..store import RunDir, load_records
    from ..suites import get_suite
    from .run import assemble, compute_metrics

    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    suite = suite or get_suite(manifest.suite)
    # the extractor's records never enter the suite's own figures; they are reported apart
    records, extracted = model_extract.split(canonical_order(load_records(run_dir)))
    metrics = compute_metrics(suite, records, extracted, manifest)
    rd.write_json("metrics.json", metrics)
    own = suite.report(metrics, records, manifest, run_dir)
    if isinstance(own, (list, tuple)):
        return metrics, list(own)
    return metrics, assemble(suite, own, metrics, manifest).write(run_dir)
