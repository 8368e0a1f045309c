"""`rolebound judge-check capability --data FILE`: the RV/C/RC judge (RoleCapBench Table 6
anchors, 0-2 each) on the user's human scores (docs/judge-check.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...judgecheck.spec import JudgeCheck, Labelled, Scale


class Context(BaseModel):
    """The role and the question as the judge sees them (never the gold answer)."""

    model_config = ConfigDict(extra="allow")
    role: str = Field(min_length=1)
    article: str = "a"
    capability: str = Field(min_length=1)
    style: str = Field(min_length=1)
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2, max_length=4)
    passage: str | None = None


async def judge(ctx, row: Labelled, settings: dict[str, Any]):
    from .judge import judge_messages, parse_judge

    c = Context.model_validate(row.context)
    role = SimpleNamespace(name=c.role, article=c.article, capability=c.capability, style=c.style)
    item = SimpleNamespace(question=c.question, options=c.options, passage=c.passage)
    return await ctx.chat("judge", judge_messages(role, item, row.reply), role="judge", parse=parse_judge,
                          max_tokens=settings.get("judge_max_tokens"))


def spec() -> JudgeCheck:
    from .judge import DIMENSIONS, TEMPLATE

    scale = Scale("ordinal", (0, 1, 2))
    return JudgeCheck(scales={k: scale for k in DIMENSIONS}, judge=judge, context_model=Context,
                      prompt_templates={"judge": TEMPLATE})
