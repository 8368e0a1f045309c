"""`rolebound compare`: several runs of one suite side by side, from their records alone."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .errors import InputError
from .report.builder import Report
from .scoring.model_extract import split
from .store import RunDir, load_records
from .suites import get_suite


def compare_runs(run_dirs: Sequence[str | Path], out: str | Path | None = None) -> list[Path]:
    runs = []
    for d in run_dirs:
        rd = RunDir(d)
        manifest = rd.read_manifest()
        runs.append((Path(d), manifest, split(load_records(d))[0]))   # rule-based figures only
    suites = {m.suite for _, m, _ in runs}
    if len(suites) != 1:
        raise InputError(f"compare needs runs of one suite; got {', '.join(sorted(suites))}")
    suite = get_suite(suites.pop())
    entries = [(d, m, suite.metrics(recs, m)) for d, m, recs in runs]
    rep = Report(f"{suite.name}: {len(entries)} runs compared")
    suite.compare(rep, entries)
    out = Path(out) if out else Path("runs") / f"compare__{suite.name}"
    out.mkdir(parents=True, exist_ok=True)
    paths = rep.write(out)
    return [p.rename(p.with_name(p.name.replace("report", "compare"))) for p in paths]
