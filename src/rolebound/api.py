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
from .errors import InputError, RoleboundError
from .models import DEFAULT_MODEL, create_backend, parse_spec
from .records import Decoding, RunManifest
from .runner import RunResult, check_resumable, execute, git_revision, now, open_session
from .store import RunDir, load_records, records_frame
from .suites import get_suite
from .suites.base import RunSettings


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
        decoding: Decoding | dict | None = None, concurrency: int | None = None,
        use_cache: bool = True, overwrite: bool = False, progress: bool = True,
        backend_options: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
        report: bool = True) -> RunResult:
    """Run a suite and write the run directory; resumes if `out` holds the same run."""
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
    if isinstance(decoding, dict):
        decoding = Decoding.model_validate(decoding)
    decoding = decoding or Decoding()
    settings = RunSettings(strategies=strategies, scoring=scoring, judge=judge, repeats=repeats,
                           limit=limit, seed=decoding.seed, options=dict(options or {}))
    bopts = dict(backend_options or {})
    backend = create_backend(model, decoding, **bopts)
    if s.offers_scoring:
        settings.scoring = scoring or s.default_scoring(backend)
        if settings.scoring not in ("generate", "logprob"):
            raise InputError(f"scoring must be 'generate' or 'logprob', not '{settings.scoring}'",
                             field="scoring")
    elif scoring:
        raise InputError(f"suite {suite} has no --scoring choice", field="scoring")
    judge_backend = None
    if s.uses_judge:
        settings.judge = judge or model
        judge_backend = backend if settings.judge == model else create_backend(
            settings.judge, Decoding(max_tokens=decoding.max_tokens, seed=decoding.seed), strict=False,
            **{k: v for k, v in bopts.items() if k not in ("base_url",)})
        if not s.judge_enabled(settings, backend, judge_backend):
            settings.judge, judge_backend = None, None     # no judge calls: the manifest names no judge
    elif judge:
        raise InputError(f"suite {suite} uses no judge", field="judge")
    s.check(backend, settings, judge_backend)

    dataset = s.load(data, settings)
    items = s.select(dataset.items, limit)
    if not items:
        raise InputError("the dataset has no items to run", file=dataset.source)
    out = Path(out) if out else default_out(suite, model, strategies, settings.scoring)
    rd = RunDir(out)
    old_info: dict = {}
    manifest = RunManifest(
        suite=suite, strategies=strategies, model=backend.spec, backend=backend.backend,
        judge=judge_backend.spec if judge_backend is not None else None, scoring=settings.scoring,
        decoding=decoding, dataset=dataset.source, dataset_hash=dataset.hash, n_items=len(items),
        limit=limit, repeats=repeats, options=settings.options, prompt_templates=_template_hashes(s),
        package_version=__version__, git_revision=git_revision(), started=now())
    if rd.exists():
        if overwrite:
            for name in ("records.jsonl", "metrics.json", "manifest.json"):
                (out / name).unlink(missing_ok=True)
        else:
            old = rd.read_manifest()
            check_resumable(old, manifest, out)
            manifest.started = old.started
            old_info = old.model_info
    with open_session(rd, suite, backend, decoding, judge=judge_backend, use_cache=use_cache) as session:
        rd.write_manifest(manifest)
        conc = concurrency or (256 if getattr(backend, "batching", False) else 16)
        timing: dict[str, float] = {"start": time.time()}
        asyncio.run(_run_all(s, dataset, items, settings, session, conc, progress, backend, judge_backend, timing))
    c = session.counts
    manifest.finished = now()
    manifest.counts = {"items": len(items), "jobs": len(items) * len(strategies) * repeats,
                       "model_calls": c.calls, "cache_hits": c.cache_hits, "resumed": c.resumed,
                       "failed_calls": c.errors, "failed_items": c.items_failed,
                       "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens}
    manifest.model_info = backend.info() or old_info    # a resumed run may never load the model
    manifest.timing = {k: round(v, 3) for k, v in timing.items()}   # epoch seconds, for benchmarks
    rd.write_manifest(manifest)
    if session.errors:
        (out / "errors.log").write_text("\n".join(session.errors) + "\n", encoding="utf-8")
    metrics, paths = ({}, [])
    if report:
        metrics, paths = build_report(out)
    return RunResult(run_dir=out, manifest=manifest, counts=c, metrics=metrics, report_paths=paths,
                     errors=session.errors, wall_s=time.perf_counter() - t0)


async def _run_all(s, dataset, items, settings, session, conc, progress, backend, judge_backend, timing):
    try:
        # Local engines load up front on a fresh run (the progress bar then times only the
        # items); a resumed run loads them at its first real call, so a finished one never does.
        lazy = bool(session.completed)
        for b in [backend] + ([judge_backend] if judge_backend not in (None, backend) else []):
            if not (lazy and getattr(b, "batching", False)):
                await b.prepare()
        timing["loaded"] = time.time()
        await s.before_items(session, dataset, items, settings)
        await execute(s, dataset, items, settings, session, concurrency=conc, progress=progress)
        timing["items_done"] = time.time()
        await s.after_items(session, dataset, settings)
    finally:
        await backend.close()
        if judge_backend is not None and judge_backend is not backend:
            await judge_backend.close()


def _template_hashes(suite) -> dict[str, str]:
    import hashlib

    return {k: hashlib.sha256(v.encode("utf-8")).hexdigest()[:16] for k, v in suite.prompt_templates().items()}


def build_report(run_dir: str | Path) -> tuple[dict, list[Path]]:
    """Recompute metrics.json and the report files from records.jsonl alone."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    suite = get_suite(manifest.suite)
    records = load_records(run_dir)
    metrics = suite.metrics(records, manifest)
    rd.write_json("metrics.json", metrics)
    paths = suite.report(metrics, records, manifest, run_dir)
    return metrics, paths


def load_run(run_dir: str | Path):
    """Records of a run as a DataFrame (last record per call, meta fields as columns)."""
    return records_frame(run_dir)


def load_manifest(run_dir: str | Path) -> RunManifest:
    return RunDir(run_dir).read_manifest()


__all__ = ["run", "build_report", "load_run", "load_manifest", "RoleboundError"]
