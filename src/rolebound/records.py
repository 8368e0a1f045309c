"""The typed records every suite shares: messages, decoding settings, per-call records, run manifest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class Decoding(BaseModel):
    """Per-run decoding settings; recorded in the manifest and part of every cache key."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, ge=1, le=131072)
    seed: int = 0
    stop: list[str] | None = None

    def merged(self, **override: Any) -> "Decoding":
        data = self.model_dump()
        data.update({k: v for k, v in override.items() if v is not None})
        return Decoding.model_validate(data)


CallKind = Literal["chat", "complete", "score"]


class Record(BaseModel):
    """One model call (or one scored probe). Append-only in records.jsonl; the last record per
    call_id wins, so a failed call retried on resume supersedes its error record."""

    model_config = ConfigDict(extra="allow")

    call_id: str                   # unique inside a run: item/strategy/stage[/step][#repeat]
    item_id: str
    suite: str
    strategy: str
    stage: str                     # e.g. "ba", "bc", "kv", "s2rd.narrative", "judge"
    role: str = "model"            # "model" (under test), "judge", "generator", "segmenter"
    repeat: int = 0
    kind: CallKind = "chat"
    model: str = ""                # backend:name that answered
    prompt: Any = None             # list of messages or a raw text prompt
    continuations: list[str] | None = None   # score calls: the options scored
    response: str | None = None    # raw text (score calls: the chosen continuation)
    logprobs: list[float] | None = None      # score calls: one summed log-prob per continuation
    tied: list[str] | None = None  # score calls: the continuations tied for the best log-prob (2+),
                                   # when there is a tie; `response` is then the first of them
    seed: int | None = None        # generation calls: the sampling seed sent (one per repeat)
    parsed: Any = None             # the answer the parser extracted, or "invalid"
    gold: Any = None
    correct: bool | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    cached: bool = False
    error: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)   # item fields metrics group by
    time: str | None = None


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    suite: str
    strategies: list[str]
    model: str
    backend: str
    judge: str | None = None
    extractor: str | None = None   # --extractor: model-based answer extraction, reported apart
    scoring: str | None = None
    decoding: Decoding
    judge_decoding: Decoding | None = None   # None: judge calls use `decoding`
    protocol: dict[str, Any] = Field(default_factory=dict)   # protocol.py: mode, source, departures,
                                                             # self_judged, seeds
    dataset: str                   # path or "builtin:<name>"
    dataset_hash: str
    dataset_provenance: dict[str, Any] | None = None   # an imported release: its commit, what differs, what is ours
    n_items: int
    limit: int | None = None
    repeats: int = 1
    options: dict[str, Any] = Field(default_factory=dict)
    prompt_templates: dict[str, str] = Field(default_factory=dict)   # name -> sha256[:16]
    package_version: str
    git_revision: str | None = None
    started: str | None = None
    finished: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    model_info: dict[str, Any] = Field(default_factory=dict)
    endpoints: dict[str, str] = Field(default_factory=dict)   # model/judge/extractor -> base URL (no keys)
    skipped_strategies: dict[str, str] = Field(default_factory=dict)   # default strategies left out, and why
    timing: dict[str, float] = Field(default_factory=dict)


def canonical_order(records: list["Record"]) -> list["Record"]:
    """The records sorted by a stable key: every metric (bootstraps included) is then a function
    of the set of records, never of the order the calls happened to finish in."""
    return sorted(records, key=lambda r: (r.call_id, r.repeat, r.role, r.stage))

