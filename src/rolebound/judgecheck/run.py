"""`rolebound judge-check SUITE --judge MODEL`: the suite's judge on human-labelled replies.

Every judge call goes through the run machinery (runner.open_session + runner.bounded): recorded
in records.jsonl, answered from the response cache when asked before, and resumed by the same
--out (a finished call is never asked again; a failed one is retried). The run folder holds
manifest.json (`kind: judge-check`), records.jsonl, metrics.json and report.md/html.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EndpointError, InputError, RoleboundError, RunStopped
from ..records import Decoding, RunManifest
from ..store import RunDir, claim_run_folder
from .spec import JudgeCheck, Labelled

KIND = "judge-check"
STRATEGY = "judge-check"


@dataclass
class CheckResult:
    out: Path
    metrics: dict[str, Any]
    paths: list[Path]
    counts: dict[str, int]
    failed: int


def spec_of(suite_name: str) -> tuple[Any, JudgeCheck]:
    from ..suites import get_suite

    suite = get_suite(suite_name)
    check = suite.judge_check()          # a declared hook (Suite.judge_check): None without a judge to check
    if check is None:
        raise InputError(f"suite {suite_name} has no judge to check against human labels", field="SUITE")
    return suite, check


def default_out(suite: str, judge: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", judge).strip("-")
    return Path("runs") / KIND / f"{suite}__{slug}"


def _judge_backend(suite, judge: str, options: dict | None = None):
    """The judge backend (with its own backend options) and the resolved protocol: the paper's
    judge decoding on real models, the demo settings on the demo models (protocol.resolve, as for
    any run)."""
    from ..models import create_backend, parse_spec
    from ..protocol import resolve

    backend_name, model_name = parse_spec(judge)
    resolved = resolve(suite.protocol, backend_name, {}, {}, model_name=model_name)
    decoding = resolved.judge_decoding or resolved.decoding or Decoding()
    return create_backend(judge, decoding, **(options or {})), decoding, resolved


def _manifest(suite_name, check, backend, decoding, resolved, rows, source, limit, settings) -> RunManifest:
    import hashlib

    from ..records import VERSION
    from ..runner import git_revision, now
    from .data import rows_hash

    templates = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in check.prompt_templates.items()}
    if resolved.mode == "paper" and check.departures is not None:
        resolved.departures.extend(d for d in check.departures(rows) if d not in resolved.departures)
    return RunManifest(suite=suite_name, strategies=[STRATEGY], model=backend.spec, backend=backend.backend,
                       judge=backend.spec, decoding=decoding, judge_decoding=decoding,
                       protocol={**resolved.manifest(), "self_judged": False}, dataset=source,
                       dataset_hash=rows_hash(rows), n_items=len(rows), limit=limit, options=settings,
                       prompt_templates=templates, package_version=VERSION, git_revision=git_revision(),
                       started=now(), kind=KIND)


async def _judge_all(session, check: JudgeCheck, rows: list[Labelled], settings: dict, progress: bool,
                     concurrency: int | None = None) -> int:
    from ..runner import bounded
    from ..loop import default_concurrency
    from ..runner import CallFailed, ItemContext

    failed = 0
    backend = session.backend

    async def one(row: Labelled) -> None:
        nonlocal failed
        key, by = check.cluster(row)
        meta = {"group": row.group, "labels": row.labels, "cluster": key, "cluster_by": by,
                **{k: v for k, v in row.context.items() if k == "task"}}
        ctx = ItemContext(session=session, item_id=row.id, strategy=STRATEGY, meta=meta)
        try:
            await check.judge(ctx, row, settings)
        except CallFailed as exc:
            failed += 1
            session.errors.append(f"{exc.record.call_id}: {exc.record.error}")

    if not getattr(backend, "batching", False):
        await backend.prepare()
    # a local engine loads at the first call the cache cannot answer (runner.Session._load), so a
    # check answered by a run's cache (carried replies) needs neither its weights nor its engine
    try:
        await bounded(rows, one, concurrency=concurrency or default_concurrency(backend),
                      label=f"judge-check ({backend.spec})",
                      progress=progress)
    finally:
        await backend.close()
    return failed


def run(suite_name: str, judge: str, *, data: str | Path | None = None, limit: int | None = None,
        out: str | Path | None = None, progress: bool = True, use_cache: bool = True,
        resamples: int | None = None, concurrency: int | None = None,
        judge_options: dict | None = None) -> CheckResult:
    from ..loop import EngineStopped, stop_signals
    from ..runner import check_resumable, finish, open_session
    from .data import load

    suite, check = spec_of(suite_name)
    backend, decoding, resolved = _judge_backend(suite, judge, judge_options)
    rows, source = load(check, suite_name, data)
    rows = check.select(rows, limit) if check.select else rows[:limit] if limit else rows
    if not rows:
        raise InputError("no labelled replies the judge can be checked on", file=source)
    settings = check.settings(backend, resolved) if check.settings else {}
    manifest = _manifest(suite_name, check, backend, decoding, resolved, rows, source, limit, settings)
    out = claim_run_folder(Path(out) if out else default_out(suite_name, backend.spec))
    rd = RunDir(out)
    earlier: dict[str, int] = {}

    def take_over() -> None:
        claim_run_folder(out)       # again, under the lock
        if rd.exists():
            old = rd.read_manifest()
            check_resumable(old, manifest, out)
            manifest.started = old.started
            earlier.update(old.counts or {})

    stopped = None
    with open_session(rd, suite_name, backend, decoding, judge=backend, judge_decoding=decoding,
                      use_cache=use_cache, on_locked=take_over) as session:
        rd.write_manifest(manifest)
        sig = None
        try:
            with stop_signals() as sig:     # Ctrl-C, SIGTERM, SIGHUP: what is done is kept (loop.py)
                failed = asyncio.run(sig.attach(_judge_all(session, check, rows, settings, progress, concurrency)))
        except (KeyboardInterrupt, asyncio.CancelledError, EngineStopped):
            code = (sig.code if sig is not None else None) or 130
            stopped = RunStopped(f"{'terminated' if code == 143 else 'interrupted'}; the same command resumes {out}",
                                 exit_code=code)
            failed = 0
        except EndpointError as exc:      # the judge's endpoint cannot answer: stop, resumable
            stopped, failed = exc, 0
            session.errors.append(f"run stopped: {exc}")
        c = session.counts
        now_counts = {"items": len(rows), "model_calls": c.calls, "cache_hits": c.cache_hits,
                      "resumed": c.resumed, "failed_calls": c.errors}
        manifest.counts = {k: (v if k == "items" else earlier.get(k, 0) + v) for k, v in now_counts.items()}
        finish(rd, manifest, session, bool(stopped))
    if stopped:
        raise stopped
    metrics, paths = build(out, resamples=resamples)
    return CheckResult(out=out, metrics=metrics, paths=paths, counts=dict(now_counts), failed=failed)


def build(run_dir: str | Path, *, resamples: int | None = None) -> tuple[dict[str, Any], list[Path]]:
    """metrics.json and report.md/html of a judge-check run, from its records alone."""
    from ..store import load_records
    from .metrics import BOOTSTRAP, compute
    from .report import write_report

    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    if getattr(manifest, "kind", None) != KIND:
        raise RoleboundError(f"{run_dir} is not a judge-check run")
    _, check = spec_of(manifest.suite)
    records = load_records(run_dir)
    metrics = compute(records, check, resamples=resamples or BOOTSTRAP)
    rd.write_json("metrics.json", metrics)
    return metrics, write_report(metrics, records, manifest, Path(run_dir))


def humans_table(suite_name: str, data: str | Path | None = None, limit: int | None = None) -> dict[str, Any]:
    """The annotators' agreement with each other on the labelled rows (every row, or --limit's
    selection): no judge, no run folder."""
    from .data import load
    from .metrics import humans_only

    _, check = spec_of(suite_name)
    rows, _ = load(check, suite_name, data)
    if limit:
        rows = check.select(rows, limit) if check.select else rows[:limit]
    return humans_only(rows, check)
