"""Re-judge an existing run with another judge model, without regenerating answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from .errors import InputError
from .records import Record, RunManifest
from .store import RunDir


def rejudge(run_dir: str | Path, judge: str, *, progress: bool = True) -> None:
    from .suites import get_suite

    manifest = RunDir(run_dir).read_manifest()
    suite = get_suite(manifest.suite)
    if not getattr(suite, "uses_judge", False) or not hasattr(suite, "rejudge"):
        raise InputError(f"suite {manifest.suite} has no judge to replace", field="--judge")
    suite.rejudge(Path(run_dir), judge, progress=progress)


async def judge_answers(rd: RunDir, manifest: RunManifest, judge, answers: Sequence[Record],
                        judge_one: Callable[[Any, Record], Awaitable[Any]], *, progress: bool,
                        forget_judged: bool = False) -> int:
    """The loop every suite's re-judge shares: lock the run, append to records.jsonl, run
    `judge_one(session, answer)` for each answer with the judge as both backends, and return how
    many judge calls failed (they are recorded and retried by the next re-judge).

    forget_judged: the suite reuses the old judge call ids, so earlier judgments must not count
    as already done."""
    from .loop import bounded, default_concurrency
    from .runner import CallFailed, open_session

    failed = 0
    # the run's judge decoding (the paper's, e.g. temperature 0.1), else its answer decoding
    with open_session(rd, manifest.suite, judge, manifest.decoding, judge=judge,
                      judge_decoding=manifest.judge_decoding) as session:
        if forget_judged:
            session.completed = {k: v for k, v in session.completed.items() if v.role != "judge"}

        async def one(a: Record) -> None:
            nonlocal failed
            try:
                await judge_one(session, a)
            except CallFailed:
                failed += 1

        try:
            await judge.prepare()
            await bounded(answers, one, concurrency=default_concurrency(judge), label=f"re-judge ({judge.spec})",
                          progress=progress)
        finally:
            await judge.close()
    return failed


def log_rejudge(rd: RunDir, manifest: RunManifest, entry: dict[str, Any]) -> None:
    """Append one re-judge round to the manifest's `rejudges` list."""
    from .runner import now

    log = list(getattr(manifest, "rejudges", None) or [])
    log.append({**entry, "time": now()})
    manifest.rejudges = log  # type: ignore[attr-defined]
    rd.write_manifest(manifest)
