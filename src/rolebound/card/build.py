"""`rolebound card`: each suite's quick, balanced subset run (or reused) and its headline figures.

The runs go under the card's folder (`cards/<model-slug>/runs/<suite>`) through `api.run`, which
applies the paper protocol (demo settings on the demo backends) and resumes a finished run
without a model call, so running the same card again only rebuilds the page.
"""

from __future__ import annotations


import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from ..records import VERSION
from ..errors import InputError
from ..io import read_regular
from ..models import parse_spec
from ..protocol import is_demo
from ..report.fmt import FigureError
from ..store import METRICS, RunDir, claim_folder
from ..suites import available, get_suite
from .checks import DRIFT_DOMAIN, check_metrics

CARD_JSON = "card.json"


def card_suites() -> list[str]:
    """The suites a card covers: every registered suite that declares `on_card`, in registry order
    (the built-in ones first, then those of other packages)."""
    return [n for n in available() if get_suite(n).on_card]


@dataclass
class CardResult:
    out: Path
    card: dict[str, Any]
    paths: list[Path]
    failed_calls: int = 0
    ran: list[str] = field(default_factory=list)


def spec_of(model: str) -> str:
    return ":".join(parse_spec(model))


def slug(spec: str) -> str:
    backend, name = parse_spec(spec)
    name = Path(name).name if backend == "hf" else name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{backend}-{name}").strip("-.") or "model"


def default_out(model: str) -> Path:
    return Path("cards") / slug(model)


def reused_runs(paths: Sequence[str | Path], spec: str) -> dict[str, Path]:
    """suite -> run folder of the --runs given; one clear InputError per problem."""
    out: dict[str, Path] = {}
    covered = card_suites()
    for p in paths:
        p = Path(p)
        if not p.is_dir():
            raise InputError("no such run folder", file=str(p), field="--runs")
        if not (p / "manifest.json").is_file():
            raise InputError("not a run folder (no manifest.json)", file=str(p), field="--runs")
        m = RunDir(p).read_manifest()
        if m.suite not in covered:
            known = "registered" if m.suite in available() else "unknown"
            raise InputError(f"a run of suite '{m.suite}' ({known}), which the card does not cover; "
                             f"the card takes runs of {', '.join(covered)}", file=str(p), field="--runs")
        if m.suite in out:
            raise InputError(f"two runs of suite {m.suite} ({out[m.suite]} and {p}); give one per suite",
                             file=str(p), field="--runs")
        if spec_of(m.model) != spec:
            raise InputError(f"a run of model {m.model}, not of {spec} (the card's --model)", file=str(p),
                             field="--runs")
        out[m.suite] = p
    return out


def check_judge(names: Sequence[str], spec: str, judge: str | None) -> None:
    """Before any call: a suite the paper judged with a model needs --judge on a real model."""
    if judge or is_demo(parse_spec(spec)[0]):
        return
    need = [n for n in names if get_suite(n).uses_judge and getattr(get_suite(n).protocol, "judge_required", False)]
    if need:
        raise InputError(f"{' and '.join(need)} are judged by a model in their papers: give --judge BACKEND:NAME, "
                         f"or --judge self to judge with {spec} itself (the card then says self-judged), "
                         "or reuse judged runs with --runs", field="--judge")


def make_card(model: str, *, judge: str | None = None, runs: Sequence[str | Path] = (),
              out: str | Path | None = None, limits: dict[str, int] | None = None,
              progress: bool = True, say=print, backend_options: dict[str, Any] | None = None,
              judge_options: dict[str, Any] | None = None) -> CardResult:
    """`backend_options` are the model's (--base-url, --backend-opt), `judge_options` the judge's
    own endpoint and options (--judge-base-url, --judge-api-key-env, --judge-opt)."""
    from .. import api
    from .render import write_card

    spec = spec_of(model)
    reused = reused_runs(runs, spec)
    limits = dict(limits or {})
    names = card_suites()
    bad = sorted(set(limits) - set(names))
    if bad:
        raise InputError(f"unknown suite '{bad[0]}'; the card runs {', '.join(names)}", field="--limit")
    out = claim_folder(Path(out) if out else default_out(spec), marker="card.json",
                       before=frozenset({"runs", "figures", "judge-check"}), what="card")
    todo = [n for n in names if n not in reused]
    check_judge(todo, spec, judge)
    got = {n: run_metrics(p) for n, p in reused.items()}     # checked before any model call
    for n, m in got.items():
        card_figures(get_suite(n), m, reused[n])
    sections, failed, ran = [], 0, []
    for name in names:
        suite = get_suite(name)
        if name in reused:
            run_dir = reused[name]
            say(f"card: {name}: reusing {run_dir}")
            metrics = got[name]
        else:
            run_dir = out / "runs" / name
            limit = limits.get(name, suite.card_limit)
            say(f"card: {name}: {'all items' if limit is None else f'--limit {limit}'} -> {run_dir}")
            judged = suite.uses_judge
            res = api.run(name, model=model, judge=judge if judged else None, limit=limit, out=run_dir,
                          progress=progress, backend_options=backend_options or {},
                          judge_options=(judge_options or {}) if judged and judge else {})
            failed += res.counts.errors
            metrics = res.metrics or run_metrics(run_dir)
            ran.append(name)
        sections.append(section(name, suite, run_dir, metrics, out, reused=name in reused))
    card = {"card": 1, "model": spec, "judge": judge, "demo": is_demo(parse_spec(spec)[0]),
            "created": _now(), "rolebound": VERSION, "git": _git(), "suites": sections}
    paths = write_card(card, out)
    return CardResult(out=out, card=card, paths=paths, failed_calls=failed, ran=ran)


def run_metrics(run_dir: Path) -> dict[str, Any]:
    """metrics.json of a run; rebuilt from records.jsonl (no model call) when it is missing."""
    path = Path(run_dir) / METRICS
    if not path.exists():
        from .. import api

        return api.build_report(run_dir)[0]
    try:
        data = json.loads(read_regular(path).decode("utf-8"))     # a FIFO: InputError, not a hang
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable metrics: {exc}", file=str(path)) from None
    return check_metrics(data, path)


def card_figures(suite, metrics: dict, run_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The suite's card figures and, when its hook cannot read them, the problem line."""
    try:
        return suite.card_figures(metrics) or {}, []
    except FigureError as exc:      # a figure outside its domain: the file is wrong, not its layout
        raise InputError(f"figure '{exc.key}': {exc.why}", file=str(Path(run_dir) / METRICS)) from None
    except Exception as exc:  # noqa: BLE001 - a metrics.json from other code must not take the card down
        return {}, [f"metrics.json does not hold this suite's figures ({type(exc).__name__}: {exc}); "
                    f"rebuild it with `rolebound report {run_dir}`"]


def section(name: str, suite, run_dir: Path, metrics: dict, out: Path, reused: bool) -> dict[str, Any]:
    m = RunDir(run_dir).read_manifest()
    proto = m.protocol or {}
    cf, problems = card_figures(suite, metrics, run_dir)
    if not m.finished:
        problems.append("the run is unfinished: rerun the card (or the run) to complete it")
    c = m.counts or {}
    for strat, why in (getattr(m, "skipped_strategies", None) or {}).items():
        problems.append(f"{strat} skipped: {why}")
    if c.get("failed_calls") or c.get("failed_items"):
        problems.append(f"{c.get('failed_calls', 0)} failed call(s), {c.get('failed_items', 0)} failed item(s) "
                        "(errors.log in the run folder): rerun to retry them")
    figures = cf.get("figures") or []
    from ..report import papers

    papers.annotate(suite, figures, list(m.strategies), cf.get("strategy"))
    warnings = list((metrics.get("position_bias") or {}).get("warnings") or []) + list(cf.get("warnings") or [])
    html = Path(run_dir) / "report.html"
    try:
        drift = drift_section(metrics.get("dialogue")) if isinstance(metrics.get("dialogue"), dict) else None
    except FigureError as exc:
        raise InputError(f"figure '{exc.key}': {exc.why}", file=str(Path(run_dir) / METRICS)) from None
    return {
        "suite": name, "title": cf.get("title") or name, "run_dir": str(run_dir), "reused": reused,
        "report": link(html, out) if html.exists() else None,
        "model": m.model, "judge": m.judge, "self_judged": bool(proto.get("self_judged")),
        "endpoints": dict(getattr(m, "endpoints", None) or {}),
        "protocol": proto.get("mode") or "none", "protocol_label": papers.protocol_label(m),
        "strategies": list(m.strategies), "scoring": m.scoring, "limit": m.limit, "n_items": m.n_items,
        "repeats": m.repeats, "started": m.started, "finished": m.finished,
        "model_calls": c.get("model_calls"), "warnings": warnings,
        "figures": figures + (drift["figures"] if drift else []),
        "paper_protocol": papers.protocol_text(suite, m),
        "finding": cf.get("finding") or "", "chart": cf.get("chart"), "problems": problems,
        "judge_agreement": _judge_agreement(name, m.judge, out),
        "drift": drift["drift"] if drift else None,     # a dialogue run's metric-by-depth lines
    }


def _judge_agreement(name: str, judge: str | None, out: Path) -> str | None:
    """A line on the judge's agreement with human labels, when a judge-check run of it exists."""
    from ..judgecheck.card import judge_line

    return judge_line(name, judge, [Path("runs") / "judge-check", Path(out) / "judge-check"])


def drift_section(m: dict) -> dict[str, Any] | None:
    """A dialogue run (rolebound.dialogue): each metric's drift slope per warm-up kind, and the
    metric-by-depth lines the card draws (render.py)."""
    from ..report.fmt import POINTS, clustered, figure

    if not m or len(m.get("depths", [])) < 2:
        return None
    figs = []
    for name in m.get("names", []):
        for kind, s in (m["metrics"].get(name) or {}).items():
            d = s.get("drift") or {}
            figs.append(clustered(figure(f"drift/{name}/{kind}", f"{name} drift per 4 turns ({kind} warm-up)",
                                         d.get("slope"), unit=POINTS, lo=d.get("lo"), hi=d.get("hi"), n=d.get("n"),
                                         domain=DRIFT_DOMAIN, why="no items asked at every depth"), d.get("clusters")))
    return {"figures": figs, "drift": m}


def link(target: Path, out: Path) -> str:
    """A relative URL from the card's folder to `target` (percent-encoded)."""
    rel = os.path.relpath(Path(target).resolve(), Path(out).resolve())
    return "/".join(quote(p) for p in Path(rel).parts)


def _now() -> str:
    from ..runner import now

    return now()


def _git() -> str | None:
    from ..runner import git_revision

    return git_revision()
