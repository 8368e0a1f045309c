"""Re-judging a finished capability run (`rolebound report RUN --judge MODEL`): every role-prompted
answer gets a new judge call; answers are never regenerated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InputError
from . import metrics as cm
from ...models import create_backend
from ...models.base import CHAT
from ...records import Decoding
from ...rejudge import ROUND, endpoint_of, judge_answers, judge_stage, log_rejudge, next_round
from ...runner import ItemContext
from ...store import RunDir, load_records
from . import judge as cj
from ..base import settings_from_manifest

if TYPE_CHECKING:  # pragma: no cover
    from .suite import CapabilitySuite


def rejudge(suite: CapabilitySuite, run_dir: Path, judge_spec: str, *, progress: bool = True,
            judge_options: dict | None = None) -> int:
    """Judge again with `judge_spec`; returns the number of answers judged.

    The new judgments are a new judge round (stage `judge.<role>@N`, rolebound.rejudge): the
    old verdicts stay in records.jsonl as history and the metrics read the newest round. The
    judge of the newest round asked again resumes that round.
    """
    return asyncio.run(_rejudge(suite, Path(run_dir), judge_spec, progress, judge_options))


async def _rejudge(suite: CapabilitySuite, run_dir: Path, judge_spec: str, progress: bool,
                   judge_options: dict | None = None) -> int:
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    records = load_records(run_dir)
    answers = [r for r in cm.answer_records(records) if r.meta.get("role")]
    if not answers:
        raise InputError("no role-prompted answers to judge in this run", file=str(rd.records_path))
    settings = settings_from_manifest(suite, manifest)
    dataset = suite.load(None if manifest.dataset.startswith("builtin:") else manifest.dataset, settings)
    if dataset.hash != manifest.dataset_hash:
        raise InputError("the questions or roles changed since this run; the judge would not see what the "
                         "model saw", file=manifest.dataset)
    items = {it.id: it for it in dataset.items}
    roles = {r.id: r for r in settings.state["cfg"].roles}
    dec = manifest.decoding
    judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed), **(judge_options or {}))
    judge.require(CHAT, "the judge scores RV, C, RC in a chat")
    jmax = settings.opts.judge_max_tokens
    round_ = next_round(records, manifest, judge.spec)

    async def judge_one(session, a):
        ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat)
        role = roles[a.meta["role"]]
        await ctx.chat(judge_stage(f"judge.{role.id}", round_), cj.judge_messages(role, items[a.item_id], a.response),
                       role="judge", parse=cj.parse_judge,
                       meta={**a.meta, "judged": a.call_id, ROUND: round_, "judge": judge.spec},
                       max_tokens=int(jmax) if jmax else None)

    failed = await judge_answers(rd, manifest, judge, answers, judge_one, progress=progress)
    log_rejudge(rd, manifest, {"round": round_, "judge": judge.spec, "answers": len(answers), "failed": failed,
                               **endpoint_of(judge)})
    return len(answers)