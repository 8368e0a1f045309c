"""`rolebound compare`: several runs of one suite side by side, from their records alone."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .errors import InputError
from .records import canonical_order, split_extracted
from .report.builder import Report
from .store import RunDir, claim_folder, load_records
from .suites import get_suite


def compare_runs(run_dirs: Sequence[str | Path], out: str | Path | None = None, paper: bool = False,
                 echo: bool = False) -> list[Path]:
    """Several runs side by side (compare.md/html); `paper`: each run as more rows of the paper's
    tables (printed on the terminal too with `echo`), which one run is enough for."""
    if len(run_dirs) < (1 if paper else 2):
        raise InputError("compare needs two or more run folders (or one with --paper)", field="RUN_DIRS")
    same = [d for k, d in enumerate(run_dirs) if Path(d).resolve() in {Path(x).resolve() for x in run_dirs[:k]}]
    if same:
        raise InputError(f"{same[0]} is given twice; compare needs two or more different runs", field="RUN_DIRS")
    runs = []
    for d in run_dirs:
        rd = RunDir(d)
        manifest = rd.read_manifest()
        runs.append((Path(d), manifest, split_extracted(canonical_order(load_records(d)))[0]))   # rule-based figures only
    suites = {m.suite for _, m, _ in runs}
    if len(suites) != 1:
        raise InputError(f"compare needs runs of one suite; got {', '.join(sorted(suites))}")
    suite = get_suite(suites.pop())
    entries = [(d, m, suite.metrics(recs, m)) for d, m, recs in runs]
    rep = Report(f"{suite.name}: {len(entries)} runs compared" if not paper else
                 f"{suite.name}: {len(entries)} run(s) beside the paper's tables")
    if paper:
        paper_rows(rep, suite, entries, echo)
    else:
        suite.compare(rep, entries)
    out = Path(out) if out else Path("runs") / (f"compare__{suite.name}" + ("__paper" if paper else ""))
    # its report.md/html are written there, then renamed: never into a user's (or a run's) folder
    claim_folder(out, marker="compare.md", before=frozenset({"figures"}), what="comparison")
    out.mkdir(parents=True, exist_ok=True)
    paths = rep.write(out)
    return [p.rename(p.with_name(p.name.replace("report", "compare"))) for p in paths]


def paper_rows(rep: Report, suite, entries, echo: bool = False) -> None:
    """--paper: each of the paper's tables with the runs as more rows (report.papers.paper_tables)."""
    from .report import papers

    runs = [(f"this run: {m.model} ({d.name})", met, m) for d, m, met in entries]
    tables = papers.paper_tables(suite, runs)
    if not tables:
        raise InputError(f"the {suite.name} suite carries no paper figures these runs can be set beside")
    for d, m, _ in entries:
        rep.text(f"{d}: " + papers.protocol_text(suite, m))
    note = "; the last rows are the runs, on the paper's scale; an empty cell: a strategy the run did not run."
    for t in tables:
        rep.table(t["title"], t["columns"], t["rows"], note=t["note"] + note)
    if echo:
        print_tables(tables, [papers.protocol_text(suite, m) for _, m, _ in entries])


def print_tables(tables: list[dict], lines: list[str]) -> None:
    """The --paper tables on the terminal (rich; text from the run shown as text, no markup)."""
    from rich.table import Table
    from rich.text import Text

    from .term import console

    con = console(highlight=False)
    for line in lines:
        con.print(Text(line))
    for t in tables:
        keep = [i for i, c in enumerate(t["columns"]) if i or any(r[0] for r in t["rows"])]   # no empty section
        tab = Table(title=Text(t["title"]), title_justify="left")
        for i in keep:
            tab.add_column(Text(t["columns"][i]), overflow="fold")
        for r in t["rows"]:
            mine = str(r[0]).startswith("this run") or str(r[1]).startswith("this run")
            tab.add_row(*[Text(str(r[i])) for i in keep], style="bold" if mine else None)
        con.print(tab)
        con.print(Text(t["note"]))

