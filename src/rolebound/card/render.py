"""card.json, card.md and one self-contained card.html (charts inlined as base64 PNG, every text
escaped by jinja2; markdown through report.builder's escaping; no network access)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from ..io import read_regular, write_bytes_atomic, write_text_atomic
from ..report.builder import drawing, md_escape, md_text, png
from .chart import draw
from ..dialogue.report import png as drift_png
from ..report.fmt import fmt_figure

PROTOCOLS = {"paper": "paper settings", "demo": "demo settings (not the paper's protocol)",
             "stand-in": "a test stand-in with default decoding (not the paper's protocol)",
             "none": "suite defaults"}


def demo_note(card: dict) -> str:
    if not card.get("demo"):
        return ""
    what = ("a deterministic test stand-in that knows nothing" if card["model"].startswith("fake:")
            else "the bundled demo model (a 135M model on the CPU, demo settings)")
    return (f"{card['model']} is {what}: these figures prove that the pipeline runs end to end, "
            "not a result about any model.")


def protocol_summary(card: dict) -> str:
    modes = sorted({s["protocol"] for s in card["suites"]})
    if modes == ["demo"] and str(card.get("model", "")).startswith("fake:"):
        modes = ["stand-in"]
    text = PROTOCOLS.get(modes[0], modes[0]) if len(modes) == 1 else \
        "mixed: " + ", ".join(f"{s['suite']} {s['protocol']}" for s in card["suites"])
    selfj = [s["suite"] for s in card["suites"] if s.get("self_judged")]
    return text + (f"; self-judged: {', '.join(selfj)}" if selfj else "")


def facts(card: dict) -> list[tuple[str, str]]:
    judges = sorted({s["judge"] for s in card["suites"] if s.get("judge")})
    return [("model", card["model"]),
            ("judge", ", ".join(judges) if judges else (card.get("judge") or "none")),
            ("protocol", protocol_summary(card)),
            ("created", card["created"]),
            ("rolebound", f"{card['rolebound']} (git {card.get('git') or 'unknown'})")]


def run_line(s: dict) -> str:
    parts = [f"strategies {', '.join(s['strategies'])}",
             f"{s['n_items']} items" + (f" (--limit {s['limit']})" if s.get("limit") else ""),
             s.get("protocol_label") or PROTOCOLS.get(s["protocol"], s["protocol"])]
    if s.get("judge"):
        parts.append(f"judge {s['judge']}" + (" (self-judged: the model judged its own answers)"
                                               if s.get("self_judged") else ""))
    if s.get("scoring"):
        parts.append(f"scoring {s['scoring']}")
    for role, url in (s.get("endpoints") or {}).items():
        parts.append(f"{role} endpoint {url}")
    parts.append(f"finished {s['finished'] or 'unfinished'}")
    if s.get("reused"):
        parts.append("reused with --runs")
    return "; ".join(parts)


def figure_rows(s: dict) -> list[dict[str, str]]:
    rows = []
    for f in s["figures"]:
        if f["value"] is None:
            value, note = "-", f["why"]
        else:       # the spread's kind ("std across roles") goes to the note column
            value = fmt_figure(f, kind=False)
            kind = f"± is the {f['spread_kind']}" if f.get("spread") is not None and f.get("spread_kind") else ""
            note = "; ".join(x for x in (f.get("note"), kind) if x)
        rows.append({"label": f["label"], "value": value, "n": "" if f.get("n") is None else str(f["n"]),
                     "note": note, "missing": f["value"] is None,
                     # many models: their range and the highest, the whole list behind a click
                     "paper": f"paper: {f.get('paper_summary') or f['paper']}" if f.get("paper") else "",
                     "paper_all": f["paper"] if f.get("paper_summary") else ""})
    return rows


def _env():
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("rolebound", "report/templates"),
                       autoescape=select_autoescape(["html", "j2"]))


def write_card(card: dict, out: Path) -> list[Path]:
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    pngs = {}
    for s in card["suites"]:
        if s.get("chart"):
            pngs[s["suite"]] = png(drawing(draw, s["chart"]))
            write_bytes_atomic(out / "figures" / f"{s['suite']}.png", pngs[s["suite"]])
        if s.get("drift"):
            pngs[s["suite"] + "-drift"] = drift_png(s["drift"])
            write_bytes_atomic(out / "figures" / f"{s['suite']}-drift.png", pngs[s["suite"] + "-drift"])
    paths = [write_text_atomic(out / "card.json", json.dumps(card, indent=2, ensure_ascii=False, default=str))]
    paths.append(write_text_atomic(out / "card.md", card_md(card, pngs)))
    sections = [{**s, "rows": figure_rows(s), "run_line": run_line(s),
                 "chart_src": "data:image/png;base64," + base64.b64encode(pngs[s["suite"]]).decode()
                 if s["suite"] in pngs else None,
                 "drift_src": "data:image/png;base64," + base64.b64encode(pngs[s["suite"] + "-drift"]).decode()
                 if s["suite"] + "-drift" in pngs else None} for s in card["suites"]]
    html = _env().get_template("card.html.j2").render(card=card, facts=facts(card), demo=demo_note(card),
                                                       sections=sections)
    paths.append(write_text_atomic(out / "card.html", html))
    return paths


def card_md(card: dict, pngs: dict[str, bytes]) -> str:
    md = [f"# Model card: {md_escape(card['model'])}", ""]
    note = demo_note(card)
    if note:
        md += [f"> **Demo only.** {md_text(note)}", ""]
    md += ["| | |", "|---|---|"] + [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in facts(card)] + [""]
    for s in card["suites"]:
        md += [f"## {md_escape(s['title'])}", ""]
        if s.get("finding"):
            md += [f"**What this shows:** {md_text(s['finding'])}", ""]
        if s.get("judge_agreement"):
            md += [md_text(s["judge_agreement"]), ""]
        for p in s.get("problems") or []:
            md += [f"- **Problem:** {md_text(p)}"]
        md += [f"- **Warning:** {md_text(w)}" for w in s.get("warnings") or []]
        if s.get("problems") or s.get("warnings"):
            md.append("")
        if s.get("paper_protocol"):
            md += [f"**Against the paper:** {md_text(s['paper_protocol'])}", ""]
        md += ["| figure | value | n | note | paper |", "|---|---|---|---|---|"]
        rows = figure_rows(s)
        md += [f"| {md_escape(r['label'])} | {md_escape(r['value'])} | {md_escape(r['n'])} | {md_escape(r['note'])} "
               f"| {md_escape(r['paper'])} |" for r in rows] + [""]
        full = [r for r in rows if r["paper_all"]]
        if full:
            md += ["The paper's figures, every model:", ""]
            md += [f"- {md_text(r['label'])}: {md_text(r['paper_all'])}" for r in full] + [""]
        if s["suite"] in pngs:
            md += [f"![{md_escape(s['title'])}](figures/{s['suite']}.png)", ""]
        if s["suite"] + "-drift" in pngs:
            md += [f"![{md_escape(s['title'])}: drift by dialogue depth](figures/{s['suite']}-drift.png)", ""]
        md += [md_text(run_line(s)), ""]
        if s.get("report"):
            md += [f"[Full report]({s['report']})", ""]
    return "\n".join(md)


def read_card(path: str | Path) -> dict[str, Any]:
    """A card.json, from its path or its card folder."""
    from ..errors import InputError

    p = Path(path)
    if p.is_dir():
        p = p / "card.json"
    if not p.is_file():
        raise InputError("no card.json here (make one with rolebound card --model M)", file=str(p),
                         field="--compare")
    try:
        card = json.loads(read_regular(p).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable card: {exc}", file=str(p), field="--compare") from None
    if not isinstance(card, dict) or card.get("card") != 1 or not isinstance(card.get("suites"), list):
        raise InputError("not a rolebound card.json (no 'card': 1 and 'suites')", file=str(p), field="--compare")
    from .checks import check_card

    check_card(card, p)
    card["_path"] = str(p)
    return card
