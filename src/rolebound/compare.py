"""`rolebound compare`: several runs of one suite side by side, from their records alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from . import paired
from .errors import InputError
from .records import canonical_order, split_extracted
from .report.builder import Report
from .report.fmt import fmt_diff
from .store import RunDir, claim_folder, load_records
from .suites import get_suite
from .term import visible


def compare_runs(run_dirs: Sequence[str | Path], out: str | Path | None = None, paper: bool = False,
                 echo: bool = False) -> list[Path]:
    """Several runs side by side (compare.md/html); `paper`: each run as more rows of the paper's
    tables (printed on the terminal too with `echo`), which one run is enough for; else each run
    paired with the first (paired.py; refused on other data), printed too with `echo`."""
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
    # issue 51: runs over other data cannot be paired (one line, exit 2); the others pair with the first
    pairs = [] if paper else [paired.compare_pair(suite, runs[0], r) for r in runs[1:]]
    entries = [(d, m, suite.metrics(recs, m)) for d, m, recs in runs]
    rep = Report(f"{suite.name}: {len(entries)} runs compared" if not paper else
                 f"{suite.name}: {len(entries)} run(s) beside the paper's tables")
    if paper:
        paper_rows(rep, suite, entries, echo)
    else:
        paired_sections(rep, pairs)
        suite.compare(rep, entries)
    out = Path(out) if out else Path("runs") / (f"compare__{suite.name}" + ("__paper" if paper else ""))
    # its report.md/html are written there, then renamed: never into a user's (or a run's) folder
    claim_folder(out, marker="compare.md", before=frozenset({"figures"}), what="comparison")
    out.mkdir(parents=True, exist_ok=True)
    paths = rep.write(out)
    for pair in pairs if echo else []:      # on the terminal too, once the files are written
        print(visible("\n".join(paired.lines(pair) + terminal_lines(pair))))    # manifests' text, escaped
    return [p.rename(p.with_name(p.name.replace("report", "compare"))) for p in paths]


def paired_sections(rep: Report, pairs: list[dict]) -> None:
    """Each run against the first: what differs, before any number; then B - A per stage (paired.py)."""
    for k, pair in enumerate(pairs):
        title = "Paired differences, B - A" + (f" (run {k + 2} against run 1)" if len(pairs) > 1 else "")
        rep.text("\n\n".join(paired.lines(pair)), title=f"{title}: what differs")
        rows = table_rows(pair)
        rep.table(title, HEADS, rows, note=NOTE)


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


# -- paired differences (paired.py's numbers), formatted ----------------------------------------------
NOTE = ("B - A over the calls both runs answered (matched by item, strategy, stage and repeat); the CI resamples "
        "the clusters the suite declares (2,000 seeded draws). McNemar: exact two-sided binomial test on the "
        "discordant pairs (scipy.stats.binomtest), which treats pairs as independent; where clusters repeat an "
        "item, trust the CI. MDD: the smallest difference this pairing detects 80% of the time at two-sided 0.05. "
        "No CI under 10 clusters.")

HEADS = ["strategy", "stage", "n (both)", "A %", "B %", "B - A (pp) [95% CI]", "clusters", "MDD (pp)",
         "McNemar p", "A right only", "B right only"]


def table_rows(pair: dict[str, Any]) -> list[list[Any]]:
    def num(v, f="{:.1f}"):
        return "-" if v is None else f.format(v)

    return [[r["strategy"], r["stage"], r["n"], num(r.get("a")), num(r.get("b")), fmt_diff(r),
             r.get("clusters", 0), num(r.get("mdd")), num(r.get("p"), "{:.2g}"), r.get("a_only", "-"),
             r.get("b_only", "-")] for r in pair["rows"] if r["n"]]


def terminal_lines(pair: dict[str, Any]) -> list[str]:
    """The table, one line per stage, for a terminal of any width."""
    out = []
    for r in pair["rows"]:
        if not r["n"]:
            continue
        p = "" if r.get("p") is None else f", McNemar p {r['p']:.2g}"
        out.append(f"{r['strategy']}/{r['stage']}: B - A {fmt_diff(r)} pp on {r['n']} calls in {r['clusters']} "
                   f"clusters (A {r['a']:.1f}%, B {r['b']:.1f}%{p})")
    return out
