"""The Python API (also what the CLI calls).

    import rolebound
    res = rolebound.run("charm", model="bundled", limit=50)
    df = rolebound.load_run(res.run_dir)          # records as a pandas DataFrame
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .errors import BackendError, EndpointError, InputError, RoleboundError, RunStopped
from .io import validate_record
from .models import DEFAULT_MODEL, create_backend, parse_spec
from .protocol import is_demo, overrides_of, repeat_seed, resolve
from .records import Decoding, RunManifest
from .runner import RunResult, check_resumable, execute, git_revision, now, open_session
from .store import MANIFEST, METRICS, RECORDS, RunDir, load_records, records_frame
from .suites import get_suite
from .loop import default_concurrency
from .suites.base import RunSettings, validate_options


def default_out(suite: str, model: str, strategies: Sequence[str], scoring: str | None) -> Path:
    """Deterministic, so the same command resumes the same run."""
    backend, name = parse_spec(model)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{backend}-{Path(name).name if backend == 'hf' else name}").strip("-")
    strat = "+".join(strategies)
    return Path("runs") / f"{suite}__{slug}__{strat}" if not scoring else \
        Path("runs") / f"{suite}__{slug}__{strat}__{scoring}"


def run(suite: str, *, model: str = DEFAULT_MODEL, strategies: Sequence[str] | str | None = None,
        data: str | None = None, limit: int | None = None, out: str | Path | None = None,
        scoring: str | None = None, judge: str | None = None, repeats: int = 1,
        decoding: Decoding | dict | None = None, judge_decoding: Decoding | dict | None = None,
        protocol: str | None = None, allow_greedy_repeats: bool = False,
        concurrency: int | None = None,
        use_cache: bool = True, overwrite: bool = False, progress: bool = True,
        backend_options: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
        report: bool = True, extractor: str | None = None) -> RunResult:
    """Run a suite and write the run directory; resumes if `out` holds the same run.

    `decoding` and `judge_decoding` hold what the caller sets (a dict, or a Decoding whose set
    fields count); everything else comes from the suite's paper protocol, or from the demo
    settings on the bundled model (protocol.py). `judge="self"` judges with the model itself.
    `extractor` (BACKEND:NAME) reads the answers the rules leave as none, reported apart
    (scoring/model_extract.py)."""
    t0 = time.perf_counter()
    s = get_suite(suite)
    if isinstance(strategies, str):
        strategies = [x.strip() for x in strategies.split(",") if x.strip()]
    strategies = list(strategies or s.default_strategies)
    unknown = [x for x in strategies if x not in s.strategies]
    if unknown:
        raise InputError(f"unknown strategy '{unknown[0]}' for suite {suite}; available: "
                         + ", ".join(s.strategies), field="strategy")
    if repeats < 1:
        raise InputError("must be at least 1", field="repeats")
    if limit is not None and limit < 1:
        raise InputError("must be at least 1", field="limit")
    decoding = _checked_decoding(decoding, "decoding")
    judge_decoding = _checked_decoding(judge_decoding, "judge_decoding")
    backend_name, model_name = parse_spec(model)
    resolved = resolve(s.protocol, backend_name, overrides_of(decoding), overrides_of(judge_decoding), protocol,
                       model_name=model_name)
    decoding = resolved.decoding
    if repeats > 1 and decoding.temperature == 0 and not allow_greedy_repeats:
        raise InputError(f"--repeats {repeats} at temperature 0 gives {repeats} copies of one greedy run; "
                         "set --temperature above 0 (each repeat gets its own seed), or pass "
                         "--allow-greedy-repeats to repeat greedy decoding anyway", field="repeats")
    settings = RunSettings(strategies=strategies, scoring=scoring, judge=judge, repeats=repeats,
                           limit=limit, seed=decoding.seed, options=dict(options or {}),
                           opts=validate_options(s, options), protocol=resolved.mode)
    bopts = dict(backend_options or {})
    backend = create_backend(model, decoding, **bopts)
    settings.backend = backend.backend
    settings.demo = is_demo(backend_name, model_name)
    paper = resolved.mode == "paper"
    if s.offers_scoring:
        settings.scoring = scoring or (s.protocol.scoring if paper and s.protocol.scoring
                                       else s.default_scoring(backend))
        if settings.scoring not in ("generate", "logprob"):
            raise InputError(f"scoring must be 'generate' or 'logprob', not '{settings.scoring}'",
                             field="scoring")
        if paper and s.protocol.scoring and settings.scoring != s.protocol.scoring:
            resolved.departures.append(f"scoring {settings.scoring} instead of {s.protocol.scoring}")
    elif scoring:
        raise InputError(f"suite {suite} has no --scoring choice", field="scoring")
    judge_backend, self_judged = None, False
    if s.uses_judge:
        judge_backend, self_judged = _judge(s, suite, model, judge, settings, backend, resolved, bopts)
    elif judge:
        raise InputError(f"suite {suite} uses no judge", field="judge")
    s.check(backend, settings, judge_backend)
    extractor_backend = _extractor(s, suite, extractor, model, backend, judge_backend, bopts) if extractor else None

    try:
        dataset = s.load(data, settings)
        items = s.select(dataset.items, limit, settings)
    except (ValueError, TypeError) as exc:   # a --set value the suite could not use
        raise InputError(f"cannot load the {suite} data with these options: {exc}",
                         field="--set" if options else "--data") from None
    if not items:
        raise InputError("the dataset has no items to run", file=dataset.source)
    out = Path(out) if out else default_out(suite, model, strategies, settings.scoring)
    rd = RunDir(out)
    manifest = RunManifest(
        suite=suite, strategies=strategies, model=backend.spec, backend=backend.backend,
        judge=judge_backend.spec if judge_backend is not None else None, scoring=settings.scoring,
        extractor=extractor_backend.spec if extractor_backend is not None else None,
        decoding=decoding, judge_decoding=resolved.judge_decoding if judge_backend is not None else None,
        protocol={**resolved.manifest(), "self_judged": self_judged,
                  "seeds": [repeat_seed(decoding.seed, r) for r in range(repeats)]},
        dataset=dataset.source, dataset_hash=dataset.hash, n_items=len(items),
        limit=limit, repeats=repeats, options=settings.options, prompt_templates=_template_hashes(s),
        package_version=__version__, git_revision=git_revision(), started=now())
    earlier: dict[str, int] = {}
    old_info: dict = {}        # a resumed run may never load the model: keep what the last one said

    fresh = {"new": False}

    def take_over() -> None:
        """Under the lock, before anything in the folder is touched: a running run is never
        cleared by --overwrite, and a different run is never resumed."""
        if not rd.exists():
            fresh["new"] = not (out / RECORDS).exists()
            return
        if overwrite:
            for name in (RECORDS, METRICS, MANIFEST, "errors.log"):
                rd.remove(name)
            return
        old = rd.read_manifest()
        check_resumable(old, manifest, out)
        manifest.started = old.started
        earlier.update(old.counts)
        manifest.counts = dict(old.counts)      # so a kill -9 of this invocation keeps the totals
        old_info.update(old.model_info or {})

    jobs = len(items) * len(strategies) * repeats
    conc = concurrency or default_concurrency(backend)
    timing: dict[str, float] = {"start": time.time()}
    stopped: RoleboundError | None = None
    metrics, paths = ({}, [])
    with open_session(rd, suite, backend, decoding, judge=judge_backend, use_cache=use_cache,
                      judge_decoding=manifest.judge_decoding, extractor=extractor_backend,
                      on_locked=take_over) as session:
        rd.write_manifest(manifest)
        try:
            asyncio.run(_run_all(s, dataset, items, settings, session, conc, progress, backend,
                                 judge_backend, timing, extractor_backend))
        except KeyboardInterrupt:
            stopped = RunStopped("interrupted", exit_code=130)
        except EndpointError as exc:
            stopped = exc
            session.errors.append(f"run stopped: {exc}")
        except (InputError, BackendError):
            # an option the suite rejects only once the run starts: if nothing was recorded,
            # leave no run folder behind, so the corrected command does not meet "a different run"
            if fresh["new"] and not session.completed and _empty(rd.records_path):
                for name in (MANIFEST, RECORDS):
                    rd.remove(name)
            raise
        c = session.counts
        manifest.finished = None if stopped else now()
        manifest.counts = _add_counts(earlier, {
            "items": len(items), "jobs": jobs, "model_calls": c.calls, "cache_hits": c.cache_hits,
            "resumed": c.resumed, "failed_calls": c.errors, "failed_items": c.items_failed,
            "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens})
        manifest.model_info = backend.info() or old_info    # a resumed run may never load the model
        manifest.timing = {k: round(v, 3) for k, v in timing.items()}   # epoch seconds, for benchmarks
        rd.write_manifest(manifest)
        if session.errors:
            rd.write_text("errors.log", "\n".join(session.errors) + "\n")
        elif not stopped:
            rd.remove("errors.log")      # a clean pass: the earlier pass's failures are gone
        if report:
            try:
                metrics, paths = _build_report(out)
            except RoleboundError:
                raise
            except Exception:  # noqa: BLE001 - a partial run may not yet have what a metric needs
                if not stopped:
                    raise
        if stopped is not None:
            raise _stopped(stopped, out, session.jobs_done, jobs, paths)
    return RunResult(run_dir=out, manifest=manifest, counts=c, metrics=metrics, report_paths=paths,
                     errors=session.errors, wall_s=time.perf_counter() - t0)


def _empty(path: Path) -> bool:
    return not path.exists() or path.stat().st_size == 0


# Summed over every invocation of a run (a resume adds its own); the rest describe the last one.
_SUMMED = ("model_calls", "cache_hits", "failed_calls", "prompt_tokens", "completion_tokens")


def _add_counts(earlier: dict[str, int], now_: dict[str, int]) -> dict[str, int]:
    out = dict(now_)
    for k in _SUMMED:
        out[k] = int(earlier.get(k, 0)) + now_[k]
    out["invocations"] = int(earlier.get("invocations", 1 if earlier else 0)) + 1
    return out


def _stopped(exc: RoleboundError, out: Path, done: int, jobs: int, paths: list[Path]) -> RunStopped:
    report = f"; report: {paths[-1]}" if paths else ""
    what = "interrupted" if getattr(exc, "exit_code", 0) == 130 else f"stopped: {str(exc).rstrip('.')}"
    return RunStopped(f"{what}. {done} of {jobs} jobs done, records kept in {out}{report}; "
                      "rerun the same command to resume", exit_code=exc.exit_code)


def _checked_decoding(decoding: Decoding | dict | None, name: str) -> Decoding | dict | None:
    """A dict of decoding values checked field by field (one clear error); only the keys given
    count as set, so the protocol fills the rest."""
    if isinstance(decoding, dict):
        given = {k: v for k, v in decoding.items() if v is not None}
        return validate_record(Decoding, given, file=None, line=None, loc_prefix=(name,))
    return decoding


def _judge(s, suite, model, judge, settings, backend, resolved, bopts):
    """The judge backend (None: the suite makes no judge calls) and whether it is the model itself.
    A real model needs --judge (a paper judged with another model); `--judge self` is the explicit
    choice to judge with the model under test. Demo backends judge themselves by default."""
    proto = s.protocol
    self_judge = judge in (None, "self", model)
    settings.judge = model if self_judge else judge
    settings.judge_requested = judge is not None
    if self_judge:
        judge_backend = backend
    else:
        jdec = resolved.judge_decoding or Decoding(max_tokens=resolved.decoding.max_tokens,
                                                   seed=resolved.decoding.seed)
        judge_backend = create_backend(settings.judge, jdec, strict=False,
                                       **{k: v for k, v in bopts.items() if k not in ("base_url",)})
    if not s.judge_enabled(settings, backend, judge_backend):
        settings.judge = None      # no judge calls: the manifest names no judge
        return None, False
    if judge is None and resolved.mode == "paper" and proto is not None and proto.judge_required:
        raise InputError(f"suite {suite} is judged by a model: give --judge BACKEND:NAME (the paper used "
                         f"a separate judge, {proto.source}), or --judge self to judge with {model} "
                         "itself (the report then says self-judged)", field="judge")
    if self_judge and resolved.mode == "paper" and proto is not None and proto.judge_separate:
        resolved.departures.append("self-judged (the paper judged with another model)")
    return judge_backend, self_judge


async def _run_all(s, dataset, items, settings, session, conc, progress, backend, judge_backend, timing,
                   extractor=None):
    others = [b for b in (judge_backend, extractor) if b is not None and b is not backend]
    others = [b for k, b in enumerate(others) if b not in others[:k]]
    try:
        # Local engines load up front on a fresh run (the progress bar then times only the
        # items); a resumed run loads them at its first real call, so a finished one never does.
        lazy = bool(session.completed)
        for b in [backend] + others:
            if not (lazy and getattr(b, "batching", False)):
                await b.prepare()
        timing["loaded"] = time.time()
        settings.state["progress"] = progress     # run-level work (after_items) shows a bar like the items
        await s.before_items(session, dataset, items, settings)
        await execute(s, dataset, items, settings, session, concurrency=conc, progress=progress)
        timing["items_done"] = time.time()
        await s.after_items(session, dataset, settings)
        if extractor is not None:
            from .scoring.model_extract import extract_all

            await extract_all(s, session, extractor.spec, concurrency=conc, progress=progress)
    finally:
        await backend.close()
        for b in others:
            await b.close()


def _extractor(s, suite, spec, model, backend, judge_backend, bopts):
    """The extractor backend: the model's or the judge's own when the spec names it (no second
    copy of a local model), else a new one sharing the run's backend options it knows."""
    from .suites.base import Suite
    from .scoring.model_extract import DECODING

    if type(s).model_extraction_candidates is Suite.model_extraction_candidates:
        raise InputError(f"suite {suite} has no answers for a model-based extractor to read", field="extractor")
    try:
        if spec.strip() in (model, backend.spec):
            return backend
        if judge_backend is not None and spec.strip() == judge_backend.spec:
            return judge_backend
        return create_backend(spec, DECODING, strict=False,
                              **{k: v for k, v in bopts.items() if k not in ("base_url",)})
    except RoleboundError as exc:
        raise InputError(str(exc), field="extractor") from None


def _template_hashes(suite) -> dict[str, str]:
    import hashlib

    return {k: hashlib.sha256(v.encode("utf-8")).hexdigest()[:16] for k, v in suite.prompt_templates().items()}


def build_report(run_dir: str | Path) -> tuple[dict, list[Path]]:
    """Recompute metrics.json and the report files from records.jsonl alone (refused while
    another process writes the run)."""
    rd = RunDir(run_dir)
    rd.read_manifest()          # not a run folder: say so before making a .lock in it
    rd.lock()
    try:
        return _build_report(Path(run_dir))
    finally:
        rd.unlock()


def _build_report(run_dir: Path) -> tuple[dict, list[Path]]:
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    if getattr(manifest, "kind", None) == "judge-check":
        from .judgecheck.run import build

        return build(run_dir)
    suite = get_suite(manifest.suite)
    from .scoring import model_extract

    # the extractor's records never enter the suite's own figures; they are reported apart
    records, extracted = model_extract.split(load_records(run_dir))
    metrics = suite.metrics(records, manifest)
    metrics["score_ties"] = score_ties(records)
    from .metrics import position

    metrics["position_bias"] = position.compute(records)       # every multiple-choice stage
    if sh := position.shifts(records):                          # --set permutations=K
        metrics["shifts"] = sh
    if manifest.repeats > 1 and not getattr(suite, "repeats_native", False):
        metrics["over_repeats"] = over_repeats(suite, records, manifest)
    if (me := model_extract.figures(suite, records, extracted, manifest)) is not None:
        metrics["model_extraction"] = me
    rd.write_json("metrics.json", metrics)
    from .report.builder import run_sections
    from .trust import run_level

    with run_sections(metrics, manifest, add=run_level):
        paths = suite.report(metrics, records, manifest, run_dir)
    return metrics, paths


def score_ties(records) -> dict[str, Any]:
    """Scored (log-likelihood) answers whose best option is an exact tie with another."""
    scored = [r for r in records if r.kind == "score" and r.error is None]
    tied = [r.call_id for r in scored if r.tied]
    return {"scored": len(scored), "tied": len(tied),
            "rate": round(100.0 * len(tied) / len(scored), 3) if scored else None, "calls": tied[:50]}


def over_repeats(suite, records, manifest) -> dict[str, Any]:
    """Mean +- SEM over repeats of every number the suite's metrics give per repeat (the papers
    report means over runs): the metrics are recomputed on each repeat's records alone."""
    from .metrics.stats import mean_sem

    reps = sorted({r.repeat for r in records})
    try:
        per = [_numbers(suite.metrics([r for r in records if r.repeat == k], manifest)) for k in reps]
    except Exception as exc:  # noqa: BLE001 - one repeat's records may not support every metric
        return {"repeats": reps, "seeds": manifest.protocol.get("seeds"), "values": {},
                "error": f"{type(exc).__name__}: {exc}"}
    keys = [k for k in per[0] if all(k in p for p in per[1:])] if per else []
    out = {}
    for k in keys:
        vals = [p[k] for p in per]
        m, sem = mean_sem(vals)
        out[k] = {"mean": m, "sem": sem, "per_repeat": vals}
    return {"repeats": reps, "seeds": manifest.protocol.get("seeds"), "values": out}


def _numbers(d, prefix: str = "") -> dict[str, float]:
    """Float leaves of a nested metrics dict, by dotted path (ints are counts: left out)."""
    out: dict[str, float] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_numbers(v, f"{prefix}{k}."))
    elif isinstance(d, float) and d == d:
        out[prefix.rstrip(".")] = d
    return out


def load_run(run_dir: str | Path):
    """Records of a run as a DataFrame (last record per call, meta fields as columns)."""
    return records_frame(run_dir)


def load_manifest(run_dir: str | Path) -> RunManifest:
    return RunDir(run_dir).read_manifest()


__all__ = ["run", "build_report", "load_run", "load_manifest", "RoleboundError"]
