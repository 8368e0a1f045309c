"""Re-judging a finished knowledge-errors run (`rolebound report RUN --judge MODEL`): every final
answer gets a new judge call; answers are never regenerated."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ...errors import InputError
from ..base import validate_options
from .data import ERROR_TYPES
from .metrics import ANSWER_STAGE, judge_modes
from .strategies import Methods, judge_scoring_mode


def rejudge(suite, run_dir: Path, judge_spec: str, *, progress: bool = True) -> int:
    """Judge every final answer again with another judge; returns the round written.

    The new judgments are stage `judge@N` records appended to records.jsonl (answers are never
    touched); metrics use the latest round. Asking for the judge of the latest round again
    resumes that round (its finished calls cost nothing) instead of opening a new one.
    """
    return asyncio.run(_rejudge(suite, Path(run_dir), judge_spec, progress))


async def _rejudge(suite, run_dir: Path, judge_spec: str, progress: bool) -> int:
    from ...models import create_backend
    from ...records import Decoding
    from ...rejudge import judge_answers, log_rejudge, next_round
    from ...runner import ItemContext
    from ...store import RunDir, load_records

    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    records = load_records(run_dir)
    answers = [r for r in records if r.stage == ANSWER_STAGE and r.role == "model" and r.error is None
               and r.meta.get("error_type") in ERROR_TYPES]
    if not answers:
        raise InputError("no final answers to judge in this run", file=str(rd.records_path))
    dec = manifest.decoding
    judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed))
    opts = manifest.options or {}
    # no --set here: the new judge gets the default rule (logprob on the demo models)
    mode = judge_scoring_mode(None, judge)
    modes = judge_modes(records)
    if not modes and manifest.judge:
        modes = {0: opts.get("judge_scoring", "generate")}
    round_ = next_round(records, manifest, judge.spec, mode, modes)
    methods = Methods(judge_tokens=validate_options(suite, opts).judge_max_tokens, judge_scoring=mode)

    async def judge_one(session, a):
        ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat,
                          meta={k: a.meta[k] for k in ("character", "category", "error_type", "memory_id")
                                if k in a.meta})
        await methods.judge(ctx, character=a.meta.get("character", ""), error_type=a.meta["error_type"],
                            correct_memory=a.meta.get("correct_memory", ""), query=a.meta.get("query", ""),
                            response=a.response or "", round_=round_, judge_spec=judge.spec)

    failed = await judge_answers(rd, manifest, judge, answers, judge_one, progress=progress)
    log_rejudge(rd, manifest, {"round": round_, "judge": judge.spec, "judge_scoring": mode,
                               "answers": len(answers), "failed": failed})
    return round_
