"""The judge service: judge rounds, and re-judging a run with another judge without regenerating
its answers.

A run's own judge calls are round 0 (stage `S`); each re-judge is a new round N whose calls are
stage `S@N` with `meta.judge_round = N`, appended to records.jsonl. Nothing is overwritten: the
old verdicts stay as history, and the metrics read the newest round (`verdicts`). Asking
for the judge of the newest round again (same model, same mode) resumes that round: its finished
calls cost nothing, its failed ones are retried.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Sequence

from .errors import InputError, RunStopped
from .records import Record, RunManifest
from .store import RunDir


ROUND = "judge_round"


def judge_stage(stage: str, round_: int) -> str:
    """The stage name of a judge call in round `round_` (round 0 keeps the plain name)."""
    return stage if round_ == 0 else f"{stage}@{round_}"


def base_stage(stage: str) -> str:
    """The stage name without its round suffix: judge@2 -> judge."""
    return stage.partition("@")[0]


def record_round(r: Record) -> int:
    return int(r.meta.get(ROUND, 0) or 0)


def judge_calls(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.role == "judge"]


def judge_rounds(records: Iterable[Record]) -> dict[int, str]:
    """round -> judge model spec, from the judge records present."""
    out: dict[int, str] = {}
    for r in judge_calls(records):
        out.setdefault(record_round(r), r.model)
    return dict(sorted(out.items()))


def newest_round(records: Iterable[Record]) -> int | None:
    rounds = judge_rounds(records)
    return max(rounds) if rounds else None


def verdicts(records: Iterable[Record], round_: int | None = None) -> list[Record]:
    """The judge records of one round (default: the newest), failed calls included."""
    records = list(records)
    if round_ is None:
        round_ = newest_round(records)
    return [r for r in judge_calls(records) if record_round(r) == round_] if round_ is not None else []


def judge_modes(records: Iterable[Record], stage: str | None = None) -> dict[int, str]:
    """round -> how the judge was read ("generate" or "logprob"), from the judge calls (of `stage`
    only, when given). Records without `judge_scoring` in their meta: their call kind tells."""
    out: dict[int, str] = {}
    for r in judge_calls(records):
        if stage is None or base_stage(r.stage) == stage:
            out.setdefault(record_round(r), r.meta.get("judge_scoring") or ("logprob" if r.kind == "score" else "generate"))
    return dict(sorted(out.items()))


def newest_stage(records: Iterable[Record], stage: str) -> list[Record]:
    """The calls of judge stage `stage` in the newest round that has any (round 0: `stage`,
    round N: `stage@N`): what the metrics of a re-judged stage read."""
    calls = [r for r in judge_calls(records) if base_stage(r.stage) == stage]
    last = max((record_round(r) for r in calls), default=0)
    return [r for r in calls if record_round(r) == last]


def rounds_text(judges: dict, used: Any, modes: dict | None = None) -> str:
    """'round 2: judge-b (earlier: 0: judge-a, 1: ...)' for a report's facts; keys as str or int."""
    judges = {str(k): v for k, v in judges.items()}
    modes = {str(k): v for k, v in (modes or {}).items()}

    def who(k: str) -> str:
        return f"{judges.get(k, '?')} ({modes[k]})" if k in modes else judges.get(k, "?")

    used = str(used)
    earlier = [f"{k}: {who(k)}" for k in judges if k != used]
    return f"round {used}: {who(used)}" + (f" (earlier: {', '.join(earlier)})" if len(judges) > 1 else "")


def next_round(records: Iterable[Record], manifest: RunManifest, judge_spec: str,
               mode: str | None = None, modes: dict[int, str] | None = None) -> int:
    """The round a re-judge with `judge_spec` (in `mode`) writes: the newest round again if it
    used the same judge in the same mode (resume), else a new one."""
    rounds = judge_rounds(records)
    modes = modes or {}
    if not rounds and manifest.judge:
        rounds = {0: manifest.judge}
    last = max(rounds) if rounds else -1
    same = last >= 0 and rounds[last] == judge_spec and modes.get(last) == mode
    return last if same else last + 1


@dataclass
class Rejudged:
    """What one re-judge wrote: the round, its judge, the answers judged and the calls that failed."""

    round: int
    judge: str
    answers: int
    failed: int
    mode: str | None = None


def rejudge(run_dir: str | Path, judge_spec: str, *, progress: bool = True,
            judge_options: dict[str, Any] | None = None) -> Rejudged:
    """Judge a finished run's answers again with `judge_spec` (every judged suite: its `rejudge`
    hook says what to judge); answers are never touched. A new judge (or mode) opens round N; the
    newest round's judge asked again resumes it. `judge_options`: the judge's own backend options
    (base_url, api_key_env, ...: a judge on its own endpoint)."""
    from .models import create_backend
    from .records import Decoding
    from .store import load_records
    from .suites import get_suite

    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    suite = get_suite(manifest.suite)
    if not suite.uses_judge:
        raise InputError(f"suite {manifest.suite} has no judge to replace", field="--judge")
    records = load_records(run_dir)
    dec = manifest.decoding
    judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed), **(judge_options or {}))
    plan = suite.rejudge(records, manifest, judge)
    if not plan.answers:
        raise InputError("no answers to judge in this run", file=str(rd.records_path))
    round_ = next_round(records, manifest, judge.spec, plan.mode, plan.modes)

    async def one(session, a: Record) -> None:
        from .runner import ItemContext

        ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat,
                          meta=plan.context_meta(a) if plan.context_meta else {})
        await plan.judge_one(ctx, a, round_, judge.spec)

    from .loop import EngineStopped, stop_signals

    sig = None
    try:
        with stop_signals() as sig:     # Ctrl-C, SIGTERM, SIGHUP: the verdicts received are kept (loop.py)
            failed = asyncio.run(sig.attach(judge_answers(rd, manifest, judge, plan.answers, one, progress=progress)))
    except (KeyboardInterrupt, asyncio.CancelledError, EngineStopped):
        code = (sig.code if sig is not None else None) or 130
        raise RunStopped(f"{'terminated' if code == 143 else 'interrupted'}; the verdicts so far are kept in "
                         f"{rd.records_path}; the same command resumes round {round_}", exit_code=code) from None
    entry = {"round": round_, "judge": judge.spec, **({"judge_scoring": plan.mode} if plan.mode else {}),
             "answers": len(plan.answers), "failed": failed, **endpoint_of(judge)}
    log_rejudge(rd, manifest, entry)
    return Rejudged(round_, judge.spec, len(plan.answers), failed, plan.mode)


def endpoint_of(judge) -> dict[str, str]:
    """{'endpoint': base URL without credentials} of an API judge (for the rejudge log), else {}."""
    url = getattr(judge, "endpoint_url", None)
    return {"endpoint": url()} if callable(url) else {}


async def judge_answers(rd: RunDir, manifest: RunManifest, judge, answers: Sequence[Record],
                        judge_one: Callable[[Any, Record], Awaitable[Any]], *, progress: bool) -> int:
    """The loop every suite's re-judge shares: lock the run, append to records.jsonl, run
    `judge_one(session, answer)` for each answer with the judge as both backends, and return how
    many judge calls failed (they are recorded and retried by the next re-judge of that round)."""
    from .runner import bounded
    from .loop import default_concurrency
    from .runner import CallFailed, open_session

    failed = 0
    # the run's judge decoding (the paper's, e.g. temperature 0.1), else its answer decoding
    with open_session(rd, manifest.suite, judge, manifest.decoding, judge=judge,
                      judge_decoding=manifest.judge_decoding) as session:
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
