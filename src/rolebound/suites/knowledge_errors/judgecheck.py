"""`rolebound judge-check knowledge-errors --data FILE`: the Tables 14-15 judge on the user's
human yes/no verdicts (docs/judge-check.md). No public human-labelled release exists for it."""

from __future__ import annotations

from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...judgecheck.spec import JudgeCheck, Labelled, Scale


class Context(BaseModel):
    """What the judge prompt reads besides the reply."""

    model_config = ConfigDict(extra="allow")
    character: str = Field(min_length=1)
    error_type: Literal["KKE", "UKE"]
    correct_memory: str = Field(min_length=1)
    query: str = Field(min_length=1)


async def judge(ctx, row: Labelled, settings: dict[str, Any]):
    from .strategies import Methods

    c = Context.model_validate(row.context)
    methods = Methods(judge_tokens=settings.get("judge_max_tokens"), judge_scoring=settings["judge_scoring"])
    return await methods.judge(ctx, character=c.character, error_type=c.error_type, correct_memory=c.correct_memory,
                               query=c.query, response=row.reply)


CLUSTER_BY = "memory (memory_id, else character and correct_memory): its KKE and UKE replies"


def cluster_of(row: Labelled) -> str | None:
    """The memory a row's reply is about, as the suite clusters its answers (Suite.clusters:
    memory_id). A row without memory_id: its character and correct memory, which a memory_id
    stands for (data.py: the items of a memory share both)."""
    c = row.context
    if c.get("memory_id") is not None:
        return f"memory_id={c['memory_id']}"
    if c.get("character") and c.get("correct_memory"):
        return f"memory={c['character']}/{c['correct_memory']}"
    return None


def spec(scoring_mode: Callable[[Any], str]) -> JudgeCheck:
    """scoring_mode(judge): the suite's rule (" yes" against " no" by log-likelihood on the demo
    models, generated elsewhere)."""
    from .prompts import JUDGE_KKE, JUDGE_UKE

    # the verdict record's parsed is "yes"/"no": the judge's single score, named "verdict"
    return JudgeCheck(scales={"verdict": Scale("nominal", ("yes", "no"))}, judge=judge, context_model=Context,
                      prompt_templates={"judge_kke": JUDGE_KKE, "judge_uke": JUDGE_UKE},
                      settings=lambda judge_backend, resolved: {"judge_scoring": scoring_mode(judge_backend),
                                                                "judge_max_tokens": None},
                      verdict=lambda parsed: {"verdict": parsed} if parsed in ("yes", "no") else None,
                      cluster_of=cluster_of, cluster_by=CLUSTER_BY)
