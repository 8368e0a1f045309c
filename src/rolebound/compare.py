"""`rolebound compare`: several runs of one suite side by side, from their records alone."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .errors import InputError
from .report.builder import Report
from .scoring.model_extract import split
from .store import RunDir, load_records
from .suites import get_suite


def compare_runs(run_dirs: Sequence[str | Path], out: str | Path | None = None, paper: bool = False) -> list[Path]:
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
    rep = Report(f"{suite.name}: {len(entries)} runs compared" if not paper else
                 f"{suite.name}: {len(entries)} run(s) beside the paper's tables")
    if paper:
        paper_rows(rep, suite, entries)
    elif hasattr(suite, "compare"):
        suite.compare(rep, entries)
    else:
        rows = []
        for d, m, met in entries:
            summ = suite.summary(met) if hasattr(suite, "summary") else []
            rows.append([str(d), m.model, ", ".join(m.strategies)] + [v for _, v in summ])
        head = [k for k, _ in (suite.summary(entries[0][2]) if hasattr(suite, "summary") else [])]
        rep.table("Runs", ["run", "model", "strategies"] + head, rows)
    out = Path(out) if out else Path("runs") / (f"compare__{suite.name}" + ("__paper" if paper else ""))
    out.mkdir(parents=True, exist_ok=True)
    paths = rep.write(out)
    return [p.rename(p.with_name(p.name.replace("report", "compare"))) for p in paths]


def paper_rows(rep: Report, suite, entries) -> None:
    """--paper: each of the paper's tables with the runs as more rows (reference.paper_tables)."""
    from . import reference

    runs = [(f"this run: {m.model} ({d.name})", met, m) for d, m, met in entries]
    tables = reference.paper_tables(suite, runs)
    if not tables:
        raise InputError(f"the {suite.name} suite carries no paper figures these runs can be set beside")
    for d, m, _ in entries:
        rep.text(f"{d}: " + reference.protocol_text(suite, m))
    for t in tables:
        rep.table(t["title"], t["columns"], t["rows"], note=t["note"] + "; the last rows are the runs, on the "
                  "paper's scale; an empty cell: a strategy the run did not run.")


def print_paper(md_path: Path) -> None:
    """The --paper tables on the terminal (compare.md as written)."""
    print(Path(md_path).read_text(encoding="utf-8"))
