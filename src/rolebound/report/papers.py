"""The papers' own figures and a run's comparison with them.

Each suite package may carry `data/paper_results.yaml`: one row per figure its paper published
(paper, table, model, condition = the suite's strategy, metric, value, sem/spread, unit, protocol,
source). `metric` is a key of the suite's card figures (`card_figures(metrics)`) or a dotted path
into metrics.json. This module loads those rows, matches them to a run's figures, compares the
run's protocol with the paper's, and writes what the report (`paper_section`), the card and
`rolebound compare --paper` show. It knows no suite: it finds the file next to the suite's class.
"""

from __future__ import annotations

import functools
import importlib
from importlib import resources
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict

from .fmt import fmt_in_unit

FILE = "paper_results.yaml"
ROW_DEFAULTS = ("paper", "source", "protocol", "unit", "note")


class PaperRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    paper: str
    table: str                      # "Table 2", "Section 6.1"
    model: str
    condition: str                  # the suite's strategy the figure corresponds to
    metric: str                     # card figure key or dotted metrics.json path
    figure: str | None = None       # the card figure it sits beside, when `metric` is a path
    run_unit: str | None = None     # the unit of the metrics.json value, where the path does not say
    value: float
    unit: str = "%"                 # "%", "pp", "0-1", "0-2", "0-5", "cosine", "count", "... difference"
    sem: float | None = None        # standard error of the mean, where the paper gives one
    spread: float | None = None     # another +- the paper gives (spread_kind says which)
    spread_kind: str = ""
    protocol: str = ""
    source: str = ""
    note: str = ""
    section: str | None = None      # where the row sits in the table (sub-table, backbone block)
    row: str | None = None          # the row label as printed
    col: int | None = None          # 1-based value column as printed
    column: str | None = None
    quote: str | None = None        # prose figures: the sentence and the figure as written
    text: str | None = None


def _package(suite) -> str:
    mod = type(suite).__module__ if not isinstance(suite, str) else suite
    return mod.rsplit(".", 1)[0] if mod.endswith(".suite") else mod


@functools.lru_cache(maxsize=None)
def _load(package: str) -> tuple[PaperRow, ...]:
    from ..errors import InputError
    from ..io import read_yaml

    try:
        path = resources.files(package) / "data" / FILE
    except (ModuleNotFoundError, TypeError, AttributeError):   # AttributeError: a module without a spec
        return ()
    if not path.is_file():
        return ()
    raw = read_yaml(path) or {}
    top = {k: raw[k] for k in ROW_DEFAULTS if k in raw}
    top.update(raw.get("defaults") or {})
    out = []
    for i, row in enumerate(raw.get("rows") or [], 1):
        try:
            out.append(PaperRow(**{**top, **row}))
        except Exception as exc:  # noqa: BLE001 - one clear line naming the row
            raise InputError(f"bad reference row {i}: {exc}".splitlines()[0], file=str(path), field="rows") from None
    return tuple(out)


def rows_for(suite) -> list[PaperRow]:
    """The paper rows of a suite (object, class module or package name); [] when it has none."""
    if isinstance(suite, str) and "." not in suite:
        from ..suites import get_suite

        suite = get_suite(suite)
    pkg = _package(suite)
    importlib.import_module(pkg)
    return list(_load(pkg))


# -- a run's value of a metric -----------------------------------------------------------------
def lookup(metrics: dict, path: str) -> Any:
    """A dotted path into metrics.json (keys may hold '-' or '/'; '.' separates levels)."""
    node: Any = metrics
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def run_value(figures: dict[str, dict], metrics: dict, metric: str, run_unit: str | None = None
              ) -> tuple[float | None, str]:
    """(value, unit) of `metric` in this run: a card figure by key, else a metrics.json path
    (a rate_ci dict gives its percent rate, a paired difference its points, a mean its mean;
    `run_unit`, from the reference row, names the unit where the path does not)."""
    f = figures.get(metric)
    if f is not None:
        return f.get("value"), f.get("unit", "%")
    v = lookup(metrics, metric)
    if isinstance(v, dict):
        for key, unit in (("rate", "%"), ("diff", "pp"), ("mean", "")):
            if key in v:
                return v[key], run_unit or unit
        return None, ""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None, ""
    return float(v), run_unit or ("count" if isinstance(v, int) else "")


def shown(row: PaperRow, run_unit: str) -> float:
    """The paper's value on the run's scale (0-1 figures become percent beside a percent rate)."""
    if row.unit.startswith("0-1") and run_unit in ("%", "pp"):
        return row.value * 100.0
    return row.value


def fmt_paper(row: PaperRow, run_unit: str) -> str:
    """The paper's value with the decimals it printed (3 for 0-1 scores, 1 once made percent)."""
    v = shown(row, run_unit)
    if row.unit == "count":
        return f"{int(v)}"
    if v != row.value:
        digits = 1
    else:
        digits = max(1, len(repr(row.value).split(".")[1]) if "." in repr(row.value) else 1)
        digits = max(digits, 3) if row.unit.startswith(("0-", "cosine")) else digits
    s = f"{v:+.{digits}f}" if "difference" in row.unit or row.unit == "pp" else f"{v:.{digits}f}"
    if row.sem is not None:
        s += f" ± {row.sem:.{digits}f}"
    return s


def matching(rows: Sequence[PaperRow], strategies: Sequence[str]) -> dict[tuple[str, str], list[PaperRow]]:
    """(metric, condition) -> rows, for the conditions (strategies) this run ran."""
    out: dict[tuple[str, str], list[PaperRow]] = {}
    for r in rows:
        if r.condition in strategies:
            out.setdefault((r.metric, r.condition), []).append(r)
    return out


def for_figure(rows: Sequence[PaperRow], key: str, strategies: Sequence[str],
               card_strategy: str | None = None) -> list[PaperRow]:
    """The rows a card figure sits beside: its key as `figure` (or `metric`), for a strategy
    this run ran (the card's own strategy when its keys name none)."""
    return [r for r in rows if (r.figure or r.metric) == key and r.condition in strategies
            and (card_strategy is None or r.figure is None or r.condition == card_strategy)]


def paper_line(rows: Sequence[PaperRow], run_unit: str) -> str:
    """'GPT-4o 72.1, Llama-3.1-8B 52.0 (Table 2)': one value per model, in the paper's order."""
    firsts: dict[str, PaperRow] = {}
    for r in rows:
        firsts.setdefault(r.model, r)      # a model once (the row of its first table)
    rows = list(firsts.values())
    tables = list(dict.fromkeys(r.table for r in rows))
    body = ", ".join(f"{r.model} {fmt_paper(r, run_unit)}" for r in rows)
    return f"{body} ({', '.join(tables)})" if body else ""


SUMMARY_OVER = 6     # more models than this: the range and the highest, the list behind a click


def paper_summary(rows: Sequence[PaperRow], run_unit: str) -> str:
    """'14 models, 7.1 to 44.2; highest GPT-4o 44.24 ± 0.23 (Table 2)' where the paper gives more
    than SUMMARY_OVER models; '' otherwise (paper_line is short enough)."""
    firsts: dict[str, PaperRow] = {}
    for r in rows:
        firsts.setdefault(r.model, r)
    rows = list(firsts.values())
    if len(rows) <= SUMMARY_OVER:
        return ""
    vals = [shown(r, run_unit) for r in rows]
    top = rows[vals.index(max(vals))]
    tables = ", ".join(dict.fromkeys(r.table for r in rows))
    lo, hi = fmt_paper(rows[vals.index(min(vals))], run_unit), fmt_paper(top, run_unit)
    return (f"{len(rows)} models, {lo.split(' ± ')[0]} to {hi.split(' ± ')[0]}; "
            f"highest {top.model} {hi} ({tables})")


def beside(suite, metrics: dict, manifest, figures: Sequence[dict] | None = None) -> list[dict[str, Any]]:
    """One entry per paper metric this run has: label, the run's value, the paper's line.
    Card figures' metrics come first, in the card's order; then the rest, in the file's order."""
    figs = {f["key"]: f for f in (figures or [])}
    groups = matching(rows_for(suite), list(manifest.strategies))
    first = [k for f in figs for k in groups if f in (k[0], groups[k][0].figure)]
    order = list(dict.fromkeys(first + list(groups)))
    out = []
    for metric, cond in order:
        rows = groups[(metric, cond)]
        val, unit = run_value(figs, metrics, metric, rows[0].run_unit)
        fig = figs.get(metric) or figs.get(rows[0].figure or "")
        unit = unit or (fig or {}).get("unit", "")
        if val is None and metric not in figs:
            continue                   # a path this run's metrics do not hold (another strategy's table)
        r0 = rows[0]
        label = fig["label"] if fig and metric in figs else \
            f"{r0.table}: " + " ".join(x for x in (r0.section if r0.section != r0.model else None,
                                                     r0.column or metric) if x) + f" ({cond})"
        out.append({"metric": metric, "condition": cond, "label": label, "value": val, "unit": unit,
                    "table": rows[0].table, "column": rows[0].column, "paper": paper_line(rows, unit),
                    "models": {r.model: shown(r, unit) for r in rows}})
    return out


def annotate(suite, figures: Sequence[dict], strategies: Sequence[str], card_strategy: str | None = None) -> None:
    """Add `paper` (the paper's line) to each card figure that has reference rows."""
    rows = rows_for(suite)
    for f in figures:
        mine = for_figure(rows, f["key"], strategies, card_strategy)
        if mine:
            f["paper"] = paper_line(mine, f.get("unit", "%"))
            f["paper_summary"] = paper_summary(mine, f.get("unit", "%"))


def demo_departure(model: str) -> str:
    """What a demo run's settings are, named for its model."""
    if model.startswith("fake:"):
        return f"a test stand-in model ({model}: it knows nothing, its answers depend only on the prompt), default decoding"
    if model == "bundled" or model.startswith("bundled:"):
        return "demo settings (the bundled demo model's decoding, not the paper's)"
    return "demo settings (default decoding, --protocol demo), not the paper's"


def protocol_comparison(suite, manifest) -> tuple[bool, list[str]]:
    """(same protocol, departures) of a run against the paper's: the manifest's own departures,
    demo settings, options that leave out part of the protocol, a --limit subset, another scoring
    mode, self-judging where the paper did not."""
    proto = manifest.protocol or {}
    paper = suite.protocol
    out: list[str] = []
    if proto.get("mode") == "demo":
        out.append(demo_departure(getattr(manifest, "model", "") or ""))
    elif proto.get("mode") == "none" or paper is None:
        out.append("the suite has no paper protocol")
    out += [d for d in proto.get("departures") or [] if d not in out]
    out += [d for d in suite.option_departures(getattr(manifest, "options", None) or {}) if d not in out]
    if paper is not None and paper.scoring and manifest.scoring and manifest.scoring != paper.scoring:
        out.append(f"scoring {manifest.scoring} instead of {paper.scoring}")
    part = partial_run(manifest)
    if part:
        out.append(part)
    if proto.get("self_judged") and not any("self-judged" in d for d in out):
        out.append("self-judged (the model under test judged its own answers)")
    return not out, out


def partial_run(manifest) -> str | None:
    """What a run that asked part of its data was (N of M items, chosen how, on which model); None
    for a whole run. An imported inspect log holds the first samples of its task (inspect's --limit)."""
    proto = manifest.protocol or {}
    n, total = manifest.n_items, proto.get("dataset_items")
    of = f" of {total}" if total else ""
    how = []
    if manifest.limit:
        how.append(f"a balanced subset (--limit {manifest.limit})")
    task = proto.get("task_items")
    if proto.get("mode") == "inspect" and (task is None or n < task):
        of = f" of {task}" if task else " of an unknown number of"
        # a log imported before the task's size was kept may be whole, or not: it is not called whole
        how.insert(0, "samples of an inspect task whose size the log does not say" if task is None else
                   "the first samples of the inspect task (inspect's --limit"
                   + (f" {proto['sample_limit']}" if proto.get("sample_limit") else "") + ")")
    if not how:
        return None
    model = getattr(manifest, "model", None)
    return f"{n}{of} items, {' within '.join(how)}" + (f", asked of {model}" if model else "")


def protocol_label(manifest) -> str:
    """The manifest's protocol label for the report's facts, never 'the paper's protocol' on part of the data."""
    label = (manifest.protocol or {}).get("label") or ""
    part = partial_run(manifest)
    if part and label.endswith("(the paper's protocol)"):
        label = label[: -len("(the paper's protocol)")] + f"(the paper's settings, on {part})"
    return label


def protocol_text(suite, manifest) -> str:
    same, departures = protocol_comparison(suite, manifest)
    src = getattr(suite.protocol, "source", "") or "the paper"
    if same:
        return f"This run followed the paper's protocol ({src})."
    return f"This run departs from the paper's protocol ({src}): " + "; ".join(departures) + "."


# -- a run's report: the paper beside the run -----------------------------------------------------
def paper_section(rep, suite, metrics: dict, manifest) -> None:
    """Into a run's report: the protocol comparison among the facts, and the 'paper beside this
    run' table."""
    entries = beside(suite, metrics, manifest, list(_figures(suite, metrics).values()))
    text = protocol_text(suite, manifest)
    if suite.protocol is not None:      # suites with no paper (mcq) say nothing
        rep.meta.append(("against the paper", text))
    if not entries:
        return
    rows = [[e["label"], fmt_in_unit(e["value"], e["unit"]), e["paper"]] for e in entries]
    first = rows_for(suite)[0]
    rep.table("The paper's figures beside this run", ["figure", "this run", "paper (model value, table)"], rows,
              note=f"{text} The paper's values ({first.paper}) were produced under: {first.protocol}. They are "
                   "copied from its tables (the suite's data/paper_results.yaml, checked against the paper's text); "
                   "0-1 scores are shown in percent beside a percent figure; rows for the strategies this run ran.")


# -- `rolebound compare RUN --paper`: the run as more rows of the paper's tables ------------------
def _paper_scale(value: float | None, run_unit: str, row: PaperRow) -> float | None:
    if value is None:
        return None
    if row.unit.startswith("0-1") and run_unit in ("%", "pp"):
        return value / 100.0
    return value


def _decimals(v: float) -> int:
    r = repr(float(v))
    return len(r.split(".")[1]) if "." in r and "e" not in r else 0


def _cell(v: float | None, row: PaperRow, digits: int) -> str:
    if v is None:
        return "-"
    if row.unit == "count":
        return str(int(v))
    return f"{v:+.{digits}f}" if "difference" in row.unit or row.unit == "pp" else f"{v:.{digits}f}"


def paper_tables(suite, runs: Sequence[tuple[str, dict, Any]]) -> list[dict[str, Any]]:
    """Each paper table (the file's rows, laid out as the paper prints them) with more rows for
    each run (`runs`: (name, metrics, manifest)), on the paper's scale; a table none of the runs
    can fill is left out. Sections that are model blocks (one row per condition) get one block
    per run; other sections (KKE/UKE, canon/canon_cot) one row per run each."""
    rows = [r for r in rows_for(suite) if r.quote is None]
    out = []
    for table in dict.fromkeys(r.table for r in rows):
        trs = [r for r in rows if r.table == table]
        cols = list(dict.fromkeys(r.column or r.metric for r in trs))
        by_row: dict[tuple[str, str], dict[str, PaperRow]] = {}
        for r in trs:
            by_row.setdefault((r.section or "", r.row or r.model), {})[r.column or r.metric] = r
        blocks = all(r.section and r.section == r.model for r in trs)
        digits = {k: max(_decimals(r.value) for r in trs if (r.column or r.metric) == k) for k in cols}
        lines = [[sec, lab] + [_cell(c[k].value, c[k], digits[k]) + (f" ± {c[k].sem:.{digits[k]}f}"
                                                                       if c[k].sem is not None else "")
                               if k in c else "" for k in cols] for (sec, lab), c in by_row.items()]
        filled = False
        for name, metrics, manifest in runs:
            new, got = _run_rows(suite, metrics, manifest, by_row, cols, blocks, name, digits)
            lines += new
            filled |= got
        if filled:
            out.append({"title": f"{table} ({trs[0].paper})", "columns": ["section", "row"] + cols, "rows": lines,
                        "note": f"paper protocol: {trs[0].protocol}"})
    return out


def _run_rows(suite, metrics, manifest, by_row, cols, blocks: bool, name: str, digits: dict[str, int]
              ) -> tuple[list[list[str]], bool]:
    figs = _figures(suite, metrics)
    strategies = list(manifest.strategies)
    keys = dict.fromkeys(lab if blocks else sec for sec, lab in by_row)
    lines, filled = [], False
    for key in keys:
        src = [c for (sec, lab), c in by_row.items() if (lab if blocks else sec) == key]
        cells = []
        for col in cols:
            ref = next((c[col] for c in src if col in c), None)
            if ref is None or ref.condition not in strategies:
                cells.append("")
                continue
            v, unit = run_value(figs, metrics, ref.metric, ref.run_unit)
            filled |= v is not None
            cells.append(_cell(_paper_scale(v, unit, ref), ref, digits[col]))
        lines.append(([name, key] if blocks else [key, name]) + cells)
    return lines, filled


def _figures(suite, metrics: dict) -> dict[str, dict]:
    try:
        return {f["key"]: f for f in ((suite.card_figures(metrics) or {}).get("figures") or [])}
    except Exception:  # noqa: BLE001 - a metrics.json from other code: paths still resolve
        return {}
