"""What a suite gives `rolebound judge-check`: its judge's scores (scale of each) and one judge call
for a human-labelled reply, made through the suite's own prompt and parser.

A suite returns a `JudgeCheck` from `Suite.judge_check()`. The core reads the labelled replies
(the user's JSONL, docs/judge-check.md, or the suite's importer of a public release), asks the
judge through the run machinery and compares the judge's scores with the humans'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class Scale:
    """One score the judge gives. ordinal: numbers on `points` (e.g. 0-5); nominal: labels (yes/no)."""

    kind: str                       # "ordinal" | "nominal"
    points: tuple                   # the values a human label may take
    step: float = 0.5               # ordinal: the grid the statistics use (the mean of two humans fits)

    def grid(self) -> list:
        if self.kind == "nominal":
            return list(self.points)
        lo, hi = min(self.points), max(self.points)
        n = int(round((hi - lo) / self.step))
        return [round(lo + i * self.step, 6) for i in range(n + 1)]

    def index(self, value: Any) -> int | None:
        """Grid index of a value (ordinal: the nearest grid point within the scale), None if unusable."""
        grid = self.grid()
        if self.kind == "nominal":
            v = str(value).strip().lower() if value is not None else None
            return grid.index(v) if v in grid else None
        try:
            x = float(value)
        except (TypeError, ValueError):
            return None
        if x != x or x < grid[0] - 1e-9 or x > grid[-1] + 1e-9:
            return None
        return int(round((x - grid[0]) / self.step))

    def label_ok(self, value: Any) -> bool:
        if self.kind == "nominal":
            return self.index(value) is not None
        try:
            return float(value) in {float(p) for p in self.points}
        except (TypeError, ValueError):
            return False


class Labelled(BaseModel):
    """One human-labelled reply (a line of the JSONL format in docs/judge-check.md)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    reply: str = Field(min_length=1)                 # the role-played reply the humans scored
    labels: dict[str, dict[str, Any]]                # annotator -> {score name -> value or null}
    group: str | None = None                         # agreement is also given per group (e.g. the model)
    # the unit the design repeats (a question several models answered): resampled together
    cluster: str | None = Field(default=None, min_length=1)
    context: dict[str, Any] = Field(default_factory=dict)   # what the suite's judge prompt needs
    source: str | None = None
    note: str | None = None


@dataclass
class JudgeCheck:
    """A suite's judge, as judge-check sees it.

    judge(ctx, row, settings) makes the judge call(s) for one labelled reply through `ctx` (role
    "judge") and returns the record whose `parsed` holds {score: value} or INVALID.
    context_model validates each row's `context` (the fields the judge prompt reads).
    release(path) imports the suite's public labelled release; default_release() is its usual
    location (None: --data is required).
    """

    scales: dict[str, Scale]
    judge: Callable[..., Awaitable[Any]]
    context_model: type[BaseModel]
    prompt_templates: dict[str, str] = field(default_factory=dict)
    release: Callable[[Path], list[Labelled]] | None = None
    default_release: Callable[[], Path | None] | None = None
    judged: tuple[str, ...] = ()          # the scales the judge gives (others: humans only, the ceiling)
    select: Callable[[list[Labelled], int | None], list[Labelled]] | None = None
    settings: Callable[[Any, Any], dict[str, Any]] | None = None   # (judge backend, resolved) -> run settings
    verdict: Callable[[Any], dict[str, Any] | None] | None = None  # a verdict record's parsed -> {score: value}
    departures: Callable[[list[Labelled]], list[str]] | None = None   # rows -> how judging them departs from the paper
    # a row without its own `cluster`: the suite's cluster from its context (None: the reply alone),
    # and what that cluster is, in words
    cluster_of: Callable[[Labelled], str | None] | None = None
    cluster_by: str = ""

    def scores_of(self, parsed: Any) -> dict[str, Any] | None:
        if self.verdict is not None:
            return self.verdict(parsed)
        return parsed if isinstance(parsed, dict) else None

    def judged_scales(self) -> tuple[str, ...]:
        return self.judged or tuple(self.scales)

    def cluster(self, row: Labelled) -> tuple[str, str]:
        """(key, what it is in words) of a row's cluster: its own `cluster` field, else the suite's
        (cluster_of), else the reply itself. The kinds never share a key."""
        if row.cluster is not None:
            return f"cluster={row.cluster}", BY_FIELD
        key = self.cluster_of(row) if self.cluster_of is not None else None
        if key is not None:
            return f"suite={key}", self.cluster_by or "the suite's unit"
        return reply_cluster(row.id), BY_REPLY


BY_FIELD = "the rows' cluster field"
BY_REPLY = "reply (each its own)"


def reply_cluster(row_id: str) -> str:
    return f"reply={row_id}"
