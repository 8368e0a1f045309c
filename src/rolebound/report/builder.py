"""Markdown and one self-contained HTML file per run.

Suites add sections (text, tables, matplotlib figures, a filterable per-sample table); the
builder writes report.md (figures as PNG files beside it) and report.html (figures inlined as
base64, all text escaped by jinja2, sample data embedded as JSON and rendered with textContent;
no network access).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from jinja2 import Environment, PackageLoader, select_autoescape

# Run-level facts every report carries (protocol, ties, mean +- SEM over repeats), set by
# api.build_report around the suite's own report code.
_RUN: contextvars.ContextVar[dict | None] = contextvars.ContextVar("rolebound_run_sections", default=None)


@contextlib.contextmanager
def run_sections(metrics: dict, manifest):
    token = _RUN.set({"metrics": metrics, "manifest": manifest})
    try:
        yield
    finally:
        _RUN.reset(token)


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


def md_escape(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


class Report:
    def __init__(self, title: str, subtitle: str = ""):
        self.title, self.subtitle = title, subtitle
        self.sections: list[Section] = []
        self.meta: list[tuple[str, str]] = []

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
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)
        self.sections.append(Section("figure", title, buf.getvalue(), note, {"name": name}))

    def samples(self, title: str, columns: Sequence[str], rows: Sequence[dict], filters: Sequence[str],
                note: str = "") -> None:
        self.sections.append(Section("samples", title, {"columns": list(columns), "rows": list(rows),
                                                         "filters": list(filters)}, note))

    # -- writers ----------------------------------------------------------------------------
    def _run_level(self) -> None:
        ctx = _RUN.get()
        if not ctx or getattr(self, "_run_added", False):
            return
        self._run_added = True
        rep = (ctx["metrics"] or {}).get("over_repeats")
        if rep and rep.get("values"):
            rows = [[k, f"{v['mean']:.3f} +- {v['sem']:.3f}", ", ".join(f"{x:.3f}" for x in v["per_repeat"])]
                    for k, v in rep["values"].items()][:400]
            self.table(f"Mean +- SEM over {len(rep['repeats'])} repeats (seeds "
                       f"{', '.join(str(x) for x in rep.get('seeds') or rep['repeats'])})",
                       ["metric", "mean +- SEM", "per repeat"], rows,
                       note="each metric recomputed on one repeat's records; SEM = sample std / sqrt(repeats)")

    def write(self, run_dir: str | Path) -> list[Path]:
        self._run_level()
        run_dir = Path(run_dir)
        fig_dir = run_dir / "figures"
        md, html_sections = [f"# {self.title}", ""], []
        if self.subtitle:
            md += [self.subtitle, ""]
        if self.meta:
            md += ["| | |", "|---|---|"] + [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in self.meta] + [""]
        for s in self.sections:
            if s.title:
                md += [f"## {md_escape(s.title)}", ""]
            if s.kind == "text":
                md += [s.body, ""]
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
                png.write_bytes(s.body)
                md += [f"![{md_escape(s.title)}](figures/{png.name})", ""]
                html_sections.append({"kind": "figure", "title": s.title,
                                      "src": "data:image/png;base64," + base64.b64encode(s.body).decode()})
            elif s.kind == "samples":
                n = len(s.body["rows"])
                md += [f"{n} rows: see report.html (filterable) or records.jsonl.", ""]
                data = json.dumps(s.body, ensure_ascii=False, default=str)
                # keep the JSON inert inside <script>: no markup characters at all
                data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
                html_sections.append({"kind": "samples", "title": s.title, "json": data,
                                      "id": f"samples{len(html_sections)}"})
            if s.note:
                md += [f"*{s.note}*", ""]
                html_sections[-1]["note"] = s.note
        md_path = run_dir / "report.md"
        md_path.write_text("\n".join(md), encoding="utf-8")
        env = Environment(loader=PackageLoader("rolebound", "report/templates"),
                          autoescape=select_autoescape(["html", "j2"]))
        html = env.get_template("report.html.j2").render(title=self.title, subtitle=self.subtitle,
                                                          meta=self.meta, sections=html_sections)
        html_path = run_dir / "report.html"
        html_path.write_text(html, encoding="utf-8")
        return [md_path, html_path]


def run_facts(manifest) -> list[tuple[str, Any]]:
    """The lines every report opens with."""
    c = manifest.counts or {}
    rows = [("suite", manifest.suite), ("model", manifest.model), ("strategies", ", ".join(manifest.strategies))]
    if manifest.scoring:
        rows.append(("scoring", manifest.scoring))
    if manifest.judge:
        rows.append(("judge", manifest.judge))
    d = manifest.decoding
    proto = getattr(manifest, "protocol", None) or {}
    if proto.get("label"):
        rows.append(("protocol", proto["label"]))
    if proto.get("self_judged"):
        rows.append(("judging", "self-judged: the model under test judged its own answers"))
    rows.append(("decoding", f"temperature {d.temperature}, top_p {d.top_p}, max_tokens {d.max_tokens}, seed {d.seed}"))
    jd = getattr(manifest, "judge_decoding", None)
    if jd is not None:
        rows.append(("judge decoding", f"temperature {jd.temperature}, top_p {jd.top_p}, max_tokens {jd.max_tokens}"))
    if manifest.repeats > 1 and proto.get("seeds"):
        rows.append(("repeats", f"{manifest.repeats} (seeds {', '.join(str(x) for x in proto['seeds'])})"))
    ctx = _RUN.get()
    ties = ((ctx or {}).get("metrics") or {}).get("score_ties") or {}
    if ties.get("scored"):
        rows.append(("exact ties", f"{ties['tied']} of {ties['scored']} scored answers tie between their "
                                   "best options (the first listed is recorded; see `tied` in records)"))
    rows += [
             ("dataset", f"{manifest.dataset} (sha {manifest.dataset_hash}, {manifest.n_items} items)"),
             ("rolebound", f"{manifest.package_version} (git {manifest.git_revision or 'unknown'})"),
             ("started / finished", f"{manifest.started} / {manifest.finished or 'unfinished'}")]
    if c:
        rows.append(("calls", f"{c.get('model_calls', 0)} model calls, {c.get('cache_hits', 0)} cache hits, "
                              f"{c.get('resumed', 0)} resumed, {c.get('failed_calls', 0)} failed"))
    return rows
