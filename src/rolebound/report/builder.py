"""Markdown and one self-contained HTML file per run.

Suites add sections (text, tables, matplotlib figures, per-sample rows); the builder writes
report.md (figures as PNG files beside it, every text from the run escaped) and report.html
(figures inlined as base64, all text escaped by jinja2, sample rows and the run's records embedded
as inert JSON and rendered with textContent by the sample viewer; no network access).

The sample viewer's data (payload): the builder joins the suites' per-sample rows (each may name
its record with `_call`) with the run's records, so a row opens the whole exchange: every message,
the raw reply, the options' log-probabilities, and the judge or segmenter calls of the same item
(same item id, strategy and repeat). Long texts are stored once in a string table, since a run
repeats its system prompts and profiles thousands of times.

Figures without pyplot, and their PNGs kept in the derived cache: a `Figure` renders itself
through the Agg canvas on savefig, so the reports never import pyplot (its backend machinery and
global figure registry cost every CLI run that writes a report about 0.2 s of start-up) and never
need to close what they drew. A report or card asks for a figure as a `Drawing`: the function that
draws it and its inputs. Its PNG is kept in the derived cache under the function's name, the
source of the folder that defines it (and of this module), its inputs, the matplotlib version and
the dpi, so a report rebuilt from the same figures (`rolebound report`, a card or sweep writing
its reports again) copies the bytes it drew before and never imports matplotlib (0.7 s of
start-up, and a few tenths of a second a figure).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape

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
# markdown's own escapes (a backslash before ASCII punctuation), never HTML entities: "<" where it
# could open a tag, comment or autolink, "&" where it could start an entity; "p < 0.05" and
# "BA+ & FC-BC" stay as they are
_MD_HTML = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")
_MD_LINE_START = re.compile(r"^([ \t]*)(?:([-+=#>])|(\d+)([.)]))", re.M)
_MD_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _md_plain(s: str) -> str:
    return _MD_HTML.sub(lambda m: "\\" + m.group(0), _MD_PUNCT.sub(r"\\\1", s))


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
    """Text shown as itself in any markdown renderer (CommonMark, GitHub): outside `code spans`,
    markdown's characters are backslash-escaped, and so are a "<" that could open raw HTML or an
    autolink and an "&" that could start an entity (no raw HTML, links, images, emphasis, lists
    or quotes from run data, and no entity shown as text in a plain file); a code span stays
    one, and its text is literal anyway."""
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
        """fig: a matplotlib Figure, or a Drawing (its PNG kept in the derived cache)."""
        self.sections.append(Section("figure", title, png(fig), note, {"name": name}))

    def samples(self, title: str, columns: Sequence[str], rows: Sequence[dict], filters: Sequence[str],
                note: str = "", shown: Sequence[str] | None = None) -> None:
        """Rows for the sample viewer. `shown`: the columns of its default view (those that
        identify a sample and its outcome); the rest sit behind its column picker and in the
        detail pane. None: the first few columns."""
        self.sections.append(Section("samples", title, {"columns": list(columns), "rows": list(rows),
                                                         "filters": list(filters), "shown": shown}, note))

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
                png_path = fig_dir / f"{s.extra['name']}.png"
                write_bytes_atomic(png_path, s.body)
                md += [f"![{md_escape(s.title)}](figures/{quote(png_path.name)})", ""]
                html_sections.append({"kind": "figure", "title": s.title,
                                      "src": "data:image/png;base64," + base64.b64encode(s.body).decode()})
            elif s.kind == "samples":
                n = len(s.body["rows"])
                md += [f"{n} rows: see report.html (filterable; a row opens the whole exchange) or records.jsonl.", ""]
                data = payload(s.body["columns"], s.body["rows"], s.body["filters"], self._records(run_dir),
                               s.body.get("shown"))
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


# -- figures without pyplot, their PNGs kept in the derived cache ----------------------------------
class Drawing(NamedTuple):
    """A figure not drawn yet: fn(*args) returns a matplotlib Figure (or PNG bytes). The args are
    JSON-able values or numpy arrays."""
    fn: Callable[..., Any]
    args: tuple


def drawing(fn: Callable[..., Any], *args: Any) -> Drawing:
    return Drawing(fn, args)


def png(fig: Any, dpi: int = 110) -> bytes:
    """The PNG of a Figure, or of a Drawing (from the derived cache when drawn before)."""
    if not isinstance(fig, Drawing):
        return _save(fig, dpi)
    from importlib.metadata import version

    from ..store import cached_bytes

    draw = lambda: _save(fig.fn(*fig.args), dpi)     # noqa: E731
    code = _code(fig.fn.__module__)
    if code is None:                                  # defined where no file says what it draws
        return draw()
    parts = {"fn": f"{fig.fn.__module__}.{fig.fn.__qualname__}", "code": code, "args": _digest(fig.args),
             "matplotlib": version("matplotlib"), "dpi": dpi}
    return cached_bytes("figures", parts, draw, ".png")


def _save(fig: Any, dpi: int) -> bytes:
    if isinstance(fig, bytes):
        return fig
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


@functools.lru_cache(maxsize=None)
def _code(module: str) -> str | None:
    """A hash of every Python file beside the module (its helpers usually live there) and of this
    one: an edit to the drawing code draws the figure again. None for a module without a file."""
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        return None
    files = sorted(Path(path).parent.glob("*.py")) + [Path(__file__)]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _digest(args: tuple) -> str:
    def plain(x: Any) -> Any:
        import numpy as np

        if isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            return {"ndarray": hashlib.sha256(a.tobytes()).hexdigest(), "shape": a.shape, "dtype": str(a.dtype)}
        if isinstance(x, np.generic):
            return x.item()
        raise TypeError(f"a figure input of type {type(x).__name__} cannot be keyed")

    blob = json.dumps(args, sort_keys=True, ensure_ascii=False, default=plain)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None,
             layout: str | None = None, **kw: Any):
    """(figure, axes) as `pyplot.subplots` gives them, for a figure nobody shows on screen."""
    import matplotlib
    from matplotlib.figure import Figure

    # no text of ours is mathtext, and data text drawn ('$', '_' in a model's name) must read as typed
    matplotlib.rcParams["text.parse_math"] = False
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kw)


# -- the sample viewer's data ----------------------------------------------------------------------
GENERIC = ("parsed", "gold", "outcome", "reading")
LONG = ("response", "answer", "judge reply")
_MARKER = re.compile(r"(?:Question:|<question>)\s*", re.I)


def reading(rec) -> str | None:
    """The rule that read the answer, when the record carries one (an attribute or meta field)."""
    v = getattr(rec, "reading", None)
    if v is None:
        v = (rec.meta or {}).get("reading")
    return None if v in (None, "") else str(v)


def question_text(rec) -> str:
    """The question the user asked: meta.query/question, else the last user turn's question line
    (never a prefilled assistant turn such as "Answer:")."""
    meta = rec.meta or {}
    for k in ("query", "question"):
        if isinstance(meta.get(k), str) and meta[k].strip():
            return meta[k].strip()
    p = rec.prompt
    if isinstance(p, list):
        users = [m.get("content", "") for m in p if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users else ""
    else:
        text = p if isinstance(p, str) else ""
    found = list(_MARKER.finditer(text))
    if found:
        text = text[found[-1].end():]
    text = text.strip()
    return text.split("\n", 1)[0].replace("<question/>", "").strip()


def outcome(rec) -> str:
    if rec.error:
        return "error"
    if rec.correct is True:
        return "correct"
    if rec.parsed == "invalid":
        return "invalid"
    if rec.correct is False:
        return "wrong"
    return ""


class _Strings:
    def __init__(self):
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: Any) -> int | None:
        if s is None:
            return None
        s = str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


def _compact(rec, strings: _Strings) -> dict:
    p = rec.prompt
    if isinstance(p, list):
        prompt = [[m.get("role", "?"), strings(m.get("content", ""))] if isinstance(m, dict) else ["?", strings(m)]
                  for m in p]
    else:
        prompt = strings(p)
    out = {"id": rec.call_id, "item": rec.item_id, "strategy": rec.strategy, "stage": rec.stage,
           "role": rec.role, "repeat": rec.repeat, "kind": rec.kind, "model": rec.model, "prompt": prompt,
           "response": strings(rec.response), "parsed": rec.parsed, "gold": rec.gold, "correct": rec.correct,
           "error": strings(rec.error), "meta": rec.meta or {}}
    if rec.continuations is not None:
        out["options"] = rec.continuations
        out["logprobs"] = rec.logprobs
    for k in ("finish_reason", "prompt_tokens", "completion_tokens", "latency_s", "cached", "time"):
        v = getattr(rec, k, None)
        if v not in (None, False):
            out[k] = v
    r = reading(rec)
    if r:
        out["reading"] = r
    return out


def payload(columns: Sequence[str], rows: Sequence[dict], filters: Sequence[str], records: Sequence | None,
            shown: Sequence[str] | None = None) -> dict:
    """Rows for the list (columns fixed up from the records) plus the records they open.
    A column empty in every row is left out (a log-prob run has no "read by"); `shown`: the
    columns of the default view (the question and the outcome added from the records join them)."""
    columns, filters = list(columns), list(filters)
    recs = list(records or [])
    by_call = {r.call_id: i for i, r in enumerate(recs)}
    joined = [(row, by_call.get(row.get("_call"))) for row in rows]
    out_rows = []
    extra = {k: False for k in GENERIC}
    for row, ri in joined:
        d = {c: row.get(c) for c in columns}
        if ri is not None:
            rec = recs[ri]
            d["question"] = question_text(rec)
            gen = {"parsed": rec.parsed, "gold": rec.gold, "outcome": outcome(rec), "reading": reading(rec)}
            for k, v in gen.items():
                if k not in columns and v not in (None, ""):
                    if k == "parsed" and isinstance(v, str) and v == rec.response:
                        continue         # an open answer: the reply itself, already in the list
                    extra[k] = True
                d.setdefault(k, v)
            d["_r"] = ri
        out_rows.append(d)
    linked = any(ri is not None for _, ri in joined)
    if linked:                           # the question leads the list
        q = next((c for c in ("question", "query") if c in columns), "question")
        columns = [q] + [c for c in columns if c != q]
    added = [k for k in GENERIC if extra[k]]
    if added:
        at = next((i for i, c in enumerate(columns) if c in LONG), len(columns))
        columns[at:at] = added
        if "outcome" in added and "outcome" not in filters:
            filters.append("outcome")
    columns = [c for c in columns if any(d.get(c) not in (None, "") for d in out_rows)] if out_rows else columns
    filters = [f for f in filters if f in columns]
    for d in out_rows:
        for k in list(d):
            if k not in columns and k != "_r":
                del d[k]
    strings = _Strings()
    return {"columns": columns, "filters": filters, "rows": out_rows, "shown": _shown(columns, shown, linked),
            "records": [_compact(r, strings) for r in recs] if linked else [],
            "strings": strings.items}


SHOWN = 6      # columns in the default view of a viewer whose suite names none


def _shown(columns: list[str], shown: Sequence[str] | None, linked: bool) -> list[str]:
    """The default view: the suite's columns, led by the question, with the records' outcome."""
    if shown is None:
        keep = columns[:SHOWN]
    else:
        keep = [c for c in columns if c in shown or (linked and c in ("question", "outcome"))]
    if "outcome" in columns and "outcome" not in keep:
        keep.append("outcome")
    return [c for c in columns if c in keep]


def script_json(obj: Any) -> str:
    """JSON that stays inert inside <script type="application/json">: no markup characters at all
    (so no `</script>`, `<!--` or entity can end or change the block)."""
    data = json.dumps(_finite(obj), ensure_ascii=False, default=str, allow_nan=False)
    return (data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _finite(x: Any) -> Any:
    """NaN and infinities (a -inf log-prob) as null: JSON.parse rejects them."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


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
