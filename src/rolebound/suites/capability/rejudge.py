"""Re-judging a finished capability run (`rolebound report RUN --judge MODEL`): every role-prompted
answer gets a new judge call; answers are never regenerated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InputError
from ...protocol import is_demo_spec
from . import metrics as cm
from ...models import create_backend
from ...models.base import CHAT
from ...records import Decoding
from ...rejudge import judge_answers, log_rejudge
from ...runner import ItemContext
from ...store import RunDir, load_records
from . import judge as cj
from ..base import RunSettings

if TYPE_CHECKING:  # pragma: no cover
    from .suite import CapabilitySuite


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
    settings = RunSettings(strategies=list(manifest.strategies), options=dict(manifest.options or {}),
                           backend=manifest.backend, demo=is_demo_spec(manifest.model))
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

    async def judge_one(session, a):
        ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat)
        role = roles[a.meta["role"]]
        await ctx.chat(f"judge.{role.id}", cj.judge_messages(role, items[a.item_id], a.response),
                       role="judge", parse=cj.parse_judge, meta={**a.meta, "judged": a.call_id},
                       max_tokens=int(jmax) if jmax else None)

    failed = await judge_answers(rd, manifest, judge, answers, judge_one, progress=progress, forget_judged=True)
    log_rejudge(rd, manifest, {"judge": judge.spec, "answers": len(answers), "failed": failed})
    return len(answers)