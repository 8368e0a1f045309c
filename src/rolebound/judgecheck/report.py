"""A judge-check run's tables: report.md/html (core report builder) and the terminal's rich table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..report.fmt import few_clusters, fmt_stat, untrusted
from ..stats import MIN_CLUSTERS
from .metrics import ALL, HUMANS, MEAN, NOMINAL, ORDINAL

NAMES = {"spearman": "Spearman rho", "kendall": "Kendall tau-b", "qwk": "QWK", "exact": "exact", "mae": "MAE",
         "accuracy": "accuracy", "kappa": "Cohen's kappa"}
CAVEAT = ("Small local judges are expected to agree poorly with the humans; the human ceiling (the two "
          "annotators with each other, on the same replies) says how much agreement there is to reach.")


def target_label(name: str, judged: bool) -> str:
    if name == HUMANS:
        return "humans (ceiling)"
    if name == MEAN:
        return "judge vs mean"
    return f"judge vs {name}" if judged and " vs " not in name else name


def table_rows(metrics: dict[str, Any], groups: str = "all") -> tuple[list[str], list[list[str]]]:
    """(columns, rows): one row per score, group and comparison. groups="all": every group;
    "overall": the pooled rows only."""
    kinds = {b["scale"] for b in metrics["scores"].values()}
    stats = list(ORDINAL if "ordinal" in kinds else ()) + list(NOMINAL if "nominal" in kinds else ())
    cols = ["score", "group", "comparison", "n", "clusters"] + [NAMES[s] for s in stats]
    rows = []
    for score, block in metrics["scores"].items():
        for g, targets in block["groups"].items():
            if groups == "overall" and g != ALL:
                continue
            for name, st in targets.items():
                rows.append([score, g, target_label(name, block["judged"]), str(st["n"]),
                             str(st.get("clusters", "-"))] + [stat_text(st, s) for s in stats])
    return cols, rows


def stat_text(block: dict[str, Any], stat: str) -> str:
    """A statistic with its CI; below MIN_CLUSTERS clusters, why there is none instead."""
    s = fmt_stat(block.get(stat))
    g = few_clusters({"clusters": block["clusters"]}) if "clusters" in block else None
    return f"{s} {untrusted(g)}" if g is not None and s != "-" else s


def clusters_line(metrics: dict[str, Any]) -> str:
    return (f"95% cluster-bootstrap CIs, clustered by: {metrics.get('clustered_by') or 'reply'} "
            f"(the clusters column counts them; below {MIN_CLUSTERS} clusters no CI is given)")


def verdict_line(metrics: dict[str, Any]) -> str:
    v = metrics["verdicts"]
    return (f"{metrics['rows']} labelled replies: {v['read']} verdicts read, {v['unread']} unread "
            f"(the judge's reply gave no score), {v['failed']} failed calls")


def write_report(metrics: dict[str, Any], records, manifest, run_dir: Path) -> list[Path]:
    from ..report.builder import Report
    from ..report import run_facts

    rep = Report(f"Judge check: the {manifest.suite} judge against human labels",
                 f"judge {manifest.judge}; 95% cluster-bootstrap CIs ({metrics['bootstrap']['resamples']} resamples, "
                 f"seed {metrics['bootstrap']['seed']})")
    rep.records = list(records)
    rep.facts(run_facts(manifest))
    rep.text(verdict_line(metrics) + ".\n\n" + clusters_line(metrics) + ".\n\n" + CAVEAT, "Verdicts")
    cols, rows = table_rows(metrics)
    for score, block in metrics["scores"].items():
        mine = [r for r in rows if r[0] == score]
        note = "" if block["judged"] else "the suite's judge gives no such score: the humans' agreement only"
        rep.table(f"{score} ({block['scale']}, {', '.join(str(p) for p in block['points'])})", cols[1:],
                  [r[1:] for r in mine], note=note)
    rep.samples("Per reply", ["id", "group", "judge", "humans"], _samples(records), filters=["group"])
    return rep.write(run_dir)


def _samples(records) -> list[dict[str, Any]]:
    from ..records import INVALID
    from ..suites import get_suite

    out = []
    rows = sorted((r for r in records if r.role == "judge" and r.stage == "judge"), key=lambda r: r.item_id)
    check = get_suite(rows[0].suite).judge_check() if rows else None
    for r in rows:
        labels = r.meta.get("labels") or {}
        humans = "; ".join(f"{a}: " + ", ".join(f"{k} {v}" for k, v in labs.items() if v is not None)
                           for a, labs in sorted(labels.items()))
        # the suite's own reading of its judge's reply, as the metrics take it (a yes/no judge parses to a string)
        judged = check.scores_of(r.parsed) if r.error is None and r.parsed != INVALID else None
        out.append({"_call": r.call_id, "id": r.item_id, "group": r.meta.get("group") or "",
                    "judge": ", ".join(f"{k} {v}" for k, v in judged.items()) if judged else (r.error or "unread"),
                    "humans": humans})
    return out


def print_table(metrics: dict[str, Any], groups: str = "all", verdicts: bool = True) -> None:
    from rich.table import Table

    from .. import term

    cols, rows = table_rows(metrics, groups)
    t = Table(title="judge agreement with human labels (95% cluster-bootstrap CI)")
    for c in cols:
        t.add_column(c, justify="right" if c not in ("score", "group", "comparison") else "left")
    last = None
    for r in rows:
        if last is not None and r[:2] != last:
            t.add_section()
        t.add_row(*r)
        last = r[:2]
    import sys

    console = term.console(width=None if sys.stdout.isatty() else 200)    # a log keeps whole rows
    console.print(t)
    console.print(verdict_line(metrics) if verdicts else f"{metrics['rows']} labelled replies")
    console.print(clusters_line(metrics), markup=False)
