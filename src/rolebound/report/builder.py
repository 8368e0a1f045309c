"""Markdown and one self-contained HTML file per run.

Suites add sections (text, tables, matplotlib figures, per-sample rows); the builder writes
report.md (figures as PNG files beside it, every text from the run escaped) and report.html
(figures inlined as base64, all text escaped by jinja2, sample rows and the run's records embedded
as inert JSON and rendered with textContent by the sample viewer; no network access).
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape

from .samples import payload, script_json
from ..io import write_bytes_atomic, write_text_atomic

@dataclass
class Section:
    kind: str                 # text | table | figure | samples
    title: str = ""
    body: Any = None
    note: str = ""
    extra: dict = field(default_factory=dict)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.1f}"
    return str(v)


_MD_PUNCT = re.compile(r"([\\`*_\[\]~|])")
_MD_LINE_START = re.compile(r"^([ \t]*)(?:([-+=#])|(\d+)([.)]))", re.M)
_MD_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _md_plain(s: str) -> str:
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCT.sub(r"\\\1", s)


def _md_code(c: str, cell: bool) -> str:
    """A code span, re-fenced so a renderer ends it exactly where we do (its text is literal)."""
    c = " ".join(c.splitlines())
    fence = "`" * (max((len(r) for r in re.findall(r"`+", c)), default=0) + 1)
    pad = " " if c[:1] == "`" or c[-1:] == "`" else ""
    return fence + pad + (c.replace("|", "\\|") if cell else c) + pad + fence


def _md_inline(s: Any, cell: bool = False) -> str:
    s, out, at = str(s), [], 0
    for m in _MD_CODE.finditer(s):
        out += [_md_plain(s[at:m.start()]), _md_code(m.group(2), cell)]
        at = m.end()
    return "".join(out + [_md_plain(s[at:])])


def md_text(s: Any) -> str:
    """Text shown as itself in any markdown renderer: outside `code spans`, markup characters
    become entities and markdown's own are backslash-escaped (no raw HTML, links, images,
    emphasis or lists from run data); a code span stays one, and its text is literal anyway."""
    def esc(m):
        return m.group(1) + ("\\" + m.group(2) if m.group(2) else m.group(3) + "\\" + m.group(4))

    return _MD_LINE_START.sub(esc, _md_inline(s))


def md_escape(s: Any) -> str:
    """One table cell or heading: escaped, on one line."""
    return _md_inline(" ".join(str(s).splitlines()), cell=True)


class Report:
    def __init__(self, title: str, subtitle: str = ""):
        self.title, self.subtitle = title, subtitle
        self.sections: list[Section] = []
        self.meta: list[tuple[str, str]] = []
        self.records: list | None = None     # the run's records; read from records.jsonl if None

    def facts(self, rows: Sequence[tuple[str, Any]]) -> None:
        self.meta.extend((k, _cell(v)) for k, v in rows)

    def text(self, body: str, title: str = "") -> None:
        self.sections.append(Section("text", title, body))

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> None:
        self.sections.append(Section("table", title, {"columns": list(columns),
                                                       "rows": [[_cell(c) for c in r] for r in rows]}, note))

    def frame(self, title: str, df, note: str = "", index: bool = True) -> None:
        """A pandas DataFrame as a table (index kept as the first column)."""
        d = df.reset_index() if index else df
        self.table(title, [str(c) for c in d.columns], d.values.tolist(), note)

    def figure(self, title: str, fig, name: str, note: str = "") -> None:
        """fig: a matplotlib Figure, or a report.figures.Drawing (its PNG kept in the derived cache)."""
        from .figures import png

        self.sections.append(Section("figure", title, png(fig), note, {"name": name}))

    def samples(self, title: str, columns: Sequence[str], rows: Sequence[dict], filters: Sequence[str],
                note: str = "") -> None:
        self.sections.append(Section("samples", title, {"columns": list(columns), "rows": list(rows),
                                                         "filters": list(filters)}, note))

    def _records(self, run_dir: Path) -> list:
        if self.records is None:
            from ..store import RECORDS, load_records

            self.records = load_records(run_dir) if (run_dir / RECORDS).exists() else []
        return self.records

    # -- writers ----------------------------------------------------------------------------
    def write(self, run_dir: str | Path) -> list[Path]:
        run_dir = Path(run_dir)
        fig_dir = run_dir / "figures"
        md, html_sections = [f"# {self.title}", ""], []
        md[0] = f"# {md_escape(self.title)}"
        if self.subtitle:
            md += [md_text(self.subtitle), ""]
        if self.meta:
            md += ["| | |", "|---|---|"] + [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in self.meta] + [""]
        for s in self.sections:
            if s.title:
                md += [f"## {md_escape(s.title)}", ""]
            if s.kind == "text":
                md += ["\n\n".join(md_text(p) for p in s.body.split("\n\n")), ""]
                html_sections.append({"kind": "text", "title": s.title, "paras": s.body.split("\n\n")})
            elif s.kind == "table":
                cols, rows = s.body["columns"], s.body["rows"]
                md.append("| " + " | ".join(md_escape(c) for c in cols) + " |")
                md.append("|" + "---|" * len(cols))
                md += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows]
                md.append("")
                html_sections.append({"kind": "table", "title": s.title, "columns": cols, "rows": rows})
            elif s.kind == "figure":
                fig_dir.mkdir(parents=True, exist_ok=True)
                png = fig_dir / f"{s.extra['name']}.png"
                write_bytes_atomic(png, s.body)
                md += [f"![{md_escape(s.title)}](figures/{quote(png.name)})", ""]
                html_sections.append({"kind": "figure", "title": s.title,
                                      "src": "data:image/png;base64," + base64.b64encode(s.body).decode()})
            elif s.kind == "samples":
                n = len(s.body["rows"])
                md += [f"{n} rows: see report.html (filterable; a row opens the whole exchange) or records.jsonl.", ""]
                data = payload(s.body["columns"], s.body["rows"], s.body["filters"], self._records(run_dir))
                html_sections.append({"kind": "samples", "title": s.title, "json": script_json(data),
                                      "id": f"samples{len(html_sections)}"})
            if s.note:
                md += [f"*{md_text(s.note)}*", ""]
                html_sections[-1]["note"] = s.note
        md_path = run_dir / "report.md"
        write_text_atomic(md_path, "\n".join(md))
        env = Environment(loader=PackageLoader("rolebound", "report/templates"),
                          autoescape=select_autoescape(["html", "j2"]))
        html = env.get_template("report.html.j2").render(title=self.title, subtitle=self.subtitle,
                                                          meta=self.meta, sections=html_sections)
        html_path = run_dir / "report.html"
        write_text_atomic(html_path, html)
        return [md_path, html_path]


def read_by(record) -> str:
    """The rule that read a record's answer and the span it read (scoring.choice), for sample tables."""
    ex = (record.meta or {}).get("extraction")
    if not ex:
        return ""
    return f"{ex['rule']}: {ex.get('span', '')}" if ex.get("span") else ex["rule"]


def extraction_section(rep: "Report", records, metrics: dict, note: str = "") -> None:
    """How many answers each extraction rule read, per stage (docs/extraction.md lists the rules),
    then what a model-based extractor read (metrics' model_extraction); `note`: the suite's word
    on how it read them (e.g. the paper's strict reading)."""
    from ..scoring.extract import rule_counts

    counts = rule_counts(records)
    if not counts:
        model_extraction_section(rep, metrics)
        return
    text = ("Rules of rolebound.scoring.choice (docs/extraction.md); 'none:' rules read no answer "
            "(counted invalid). `rolebound report RUN` reads the stored replies again.")
    rep.table("Answer extraction: readings per rule", ["stage", "rule", "answers"],
              [[stage, rule, n] for (stage, rule), n in sorted(counts.items())],
              note=f"{text} {note}" if note else text)
    model_extraction_section(rep, metrics)


def model_extraction_section(rep: "Report", metrics: dict) -> None:
    """--extractor: how many 'none' answers the extractor model read, and the suite's summary
    figures recomputed with its readings, apart from the rule-based (paper-protocol) figures."""
    me = (metrics or {}).get("model_extraction")
    if not me:
        return
    rows = [[stage, c["sent"], c["read"], c["sent"] - c["read"]] for stage, c in sorted(me["by_stage"].items())]
    rows.append(["all", me["sent"], me["read"], me["none"]])
    rep.table(f"With model-based extraction ({me['extractor']}): 'none' answers read",
              ["stage", "sent (rules read none)", "read by the extractor", "still none"], rows,
              note="Only answers the rules read as none went to the extractor (a fixed prompt: the options "
                   "and the reply; one label or NONE). Its readings are records of their own (role "
                   "'extractor'); every other figure in this report is rule-based and does not use them.")
    if me.get("summary"):
        rep.table(f"With model-based extraction ({me['extractor']}): figures recomputed",
                  ["metric", "value"], me["summary"],
                  note="The suite's summary figures with the extractor's readings in place of the rules' "
                       "none; the paper-protocol figures above stay as the rules read them. All recomputed "
                       "metrics: metrics.json, model_extraction.metrics.")
