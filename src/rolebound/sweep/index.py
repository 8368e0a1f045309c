"""What a sweep leaves beside its run folders: index.html / index.md / index.json (every run, its
status and its report) and, with two or more models, the cross-model card (`card --compare`)
built from the sweep's own runs (no new model call)."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import InputError
from ..io import read_regular, write_text_atomic
from ..report.builder import md_escape
from .plan import Plan


def _rel(target: Path, base: Path) -> str:
    rel = os.path.relpath(Path(target).resolve(), Path(base).resolve())
    return "/".join(quote(p) for p in Path(rel).parts)


def _rows(p: Plan, outcomes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in p.runs:
        o = outcomes.get(r.key, {})
        report = r.out / "report.html"
        try:
            counts = json.loads(read_regular(r.out / "manifest.json").decode("utf-8")).get("counts") or {}
        except (OSError, ValueError, InputError):
            counts = {}
        rows.append({"run": r.key, "suite": r.suite, "model": r.model, "strategy": r.strategy or "default", "status": o.get("status", "not run"),
                     "message": o.get("message", ""), "jobs": counts.get("jobs"),
                     "failed_calls": counts.get("failed_calls"), "wall_s": o.get("wall_s"),
                     "task_s": o.get("task_s"),
                     "report": _rel(report, p.out) if report.exists() else None, "folder": _rel(r.out, p.out)})
    return rows


def write_index(p: Plan, outcomes: dict[str, dict[str, Any]], *, executor: str, cards: list[Path]) -> list[Path]:
    rows = _rows(p, outcomes)
    p.out.mkdir(parents=True, exist_ok=True)
    compare = next((c for c in cards if c.name == "compare.html"), None)
    data = {"sweep": 1, "executor": executor, "runs": rows,
            "compare": _rel(compare, p.out) if compare else None}
    paths = [write_text_atomic(p.out / "index.json", json.dumps(data, indent=2, ensure_ascii=False))]
    md = [f"# Sweep: {len(rows)} runs", "", "| run | status | jobs | failed calls | report |", "|---|---|---|---|---|"]
    for x in rows:
        status = x["status"] + (f": {x['message']}" if x["message"] else "")
        link = f"[report]({x['report']})" if x["report"] else "-"
        md.append(f"| {md_escape(x['run'])} | {md_escape(status)} | {md_escape(x['jobs'] or '-')} | "
                  f"{md_escape(x['failed_calls'] if x['failed_calls'] is not None else '-')} | {link} |")
    if compare:
        md += ["", f"Models compared: [compare.html]({data['compare']})"]
    paths.append(write_text_atomic(p.out / "index.md", "\n".join(md) + "\n"))
    paths.append(write_text_atomic(p.out / "index.html", _html(rows, data["compare"])))
    return paths


def _html(rows: list[dict[str, Any]], compare: str | None) -> str:
    e = html.escape
    body = []
    for x in rows:
        link = f'<a href="{e(x["report"])}">report</a>' if x["report"] else "-"
        msg = f'<br><small>{e(x["message"])}</small>' if x["message"] else ""
        body.append(f"<tr><td>{e(x['suite'])}</td><td>{e(x['model'])}</td><td>{e(x['strategy'])}</td>"
                    f"<td>{e(x['status'])}{msg}</td><td>{e(str(x['jobs'] or '-'))}</td>"
                    f"<td>{e(str(x['failed_calls'] if x['failed_calls'] is not None else '-'))}</td><td>{link}</td></tr>")
    cmp = f'<p>Models compared: <a href="{e(compare)}">compare.html</a></p>' if compare else ""
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>rolebound sweep</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
            f"<h1>Sweep: {len(rows)} runs</h1>{cmp}<table><tr><th>suite</th><th>model</th><th>strategy</th>"
            "<th>status</th><th>jobs</th><th>failed calls</th><th>report</th></tr>"
            + "".join(body) + "</table></body></html>\n")


def write_cards(p: Plan, outcomes: dict[str, dict[str, Any]]) -> list[Path]:
    """A card per model from its runs of the card's suites (the first run of each suite), then
    `card --compare` of them all. Nothing when fewer than two models have such a run."""
    from ..records import VERSION
    from ..card.build import _git, _now, card_suites, run_metrics, section, slug, spec_of
    from ..card.compare import compare_cards
    from ..card.render import write_card
    from ..models import parse_spec
    from ..protocol import is_demo
    from ..suites import get_suite

    per: dict[str, dict[str, Path]] = {}
    suites = card_suites()
    for r in p.runs:
        if r.suite in suites and outcomes.get(r.key, {}).get("status") in ("done", "failed calls") \
                and (r.out / "metrics.json").exists():
            per.setdefault(spec_of(r.model), {}).setdefault(r.suite, r.out)
    if len(per) < 2:
        return []
    folders = []
    for spec, runs in per.items():
        out = p.out / "cards" / slug(spec)
        sections = [section(n, get_suite(n), runs[n], run_metrics(runs[n]), out, reused=True)
                    for n in suites if n in runs]
        card = {"card": 1, "model": spec, "judge": p.runs[0].kwargs.get("judge"), "demo": is_demo(parse_spec(spec)[0]),
                "created": _now(), "rolebound": VERSION, "git": _git(), "suites": sections}
        write_card(card, out)
        folders.append(out)
    return compare_cards(folders, p.out / "compare")
