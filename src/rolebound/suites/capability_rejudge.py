"""Re-judging a finished capability run (`rolebound report RUN --judge MODEL`): every role-prompted
answer gets a new judge call; answers are never regenerated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..metrics import capability as cm
from ..models import create_backend
from ..models.base import CHAT
from ..progress import make_progress
from ..records import Decoding
from ..runner import CallFailed, ItemContext, Session, now
from ..store import ResponseCache, RunDir, load_records
from ..strategies import capability_judge as cj
from .base import RunSettings

if TYPE_CHECKING:  # pragma: no cover
    from .capability import CapabilitySuite


def rejudge(suite: CapabilitySuite, run_dir: Path, judge_spec: str, *, progress: bool = True) -> int:
    """Judge again with `judge_spec`; returns the number of answers judged.

    New judge records reuse the call ids `item/strategy/judge.<role>`, so they supersede the old
    ones (records.jsonl keeps both; the last wins).
    """
    return asyncio.run(_rejudge(suite, Path(run_dir), judge_spec, progress))


async def _rejudge(suite: CapabilitySuite, run_dir: Path, judge_spec: str, progress: bool) -> int:
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    answers = [r for r in cm.answer_records(load_records(run_dir)) if r.meta.get("role")]
    if not answers:
        raise InputError("no role-prompted answers to judge in this run", file=str(rd.records_path))
    settings = RunSettings(strategies=list(manifest.strategies), options=dict(manifest.options or {}))
    dataset = suite.load(None if manifest.dataset.startswith("builtin:") else manifest.dataset, settings)
    if dataset.hash != manifest.dataset_hash:
        raise InputError("the questions or roles changed since this run; the judge would not see what the "
                         "model saw", file=manifest.dataset)
    items = {it.id: it for it in dataset.items}
    roles = {r.id: r for r in suite.cfg.roles}
    dec = manifest.decoding
    judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed))
    judge.require(CHAT, "the judge scores RV, C, RC in a chat")
    jmax = settings.options.get("judge_max_tokens")
    failed = 0
    rd.lock()
    try:
        rd.repair()
        rd.open_for_append()
        cache = ResponseCache()
        session = Session(rd, manifest.suite, judge, dec, judge=judge, cache=cache)
        session.completed = {k: v for k, v in session.completed.items() if v.role != "judge"}
        prog, task = make_progress(len(answers), f"re-judge ({judge.spec})", enabled=progress)
        sem = asyncio.Semaphore(256 if getattr(judge, "batching", False) else 16)

        async def one(a):
            nonlocal failed
            async with sem:
                ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat)
                role = roles[a.meta["role"]]
                try:
                    await ctx.chat(f"judge.{role.id}", cj.judge_messages(role, items[a.item_id], a.response),
                                   role="judge", parse=cj.parse_judge, meta={**a.meta, "judged": a.call_id},
                                   max_tokens=int(jmax) if jmax else None)
                except CallFailed:
                    failed += 1
                finally:
                    if prog:
                        prog.advance(task)

        try:
            await judge.prepare()
            if prog:
                prog.start()
            await asyncio.gather(*[one(a) for a in answers])
        finally:
            if prog:
                prog.stop()
            await judge.close()
            rd.close()
            cache.close()
    finally:
        rd.unlock()
    log = list(getattr(manifest, "rejudges", None) or [])
    log.append({"judge": judge.spec, "answers": len(answers), "failed": failed, "time": now()})
    manifest.rejudges = log  # type: ignore[attr-defined]
    rd.write_manifest(manifest)
    return len(answers)