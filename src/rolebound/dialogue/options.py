"""The dialogue strategy's `--set` options, shared by every suite that offers it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ..suites.base import Options

WARMUPS = ("scripted", "items", "simulated")


def _parts(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v if str(x).strip()]
    return [x.strip() for x in str(v).split(",") if x.strip()]


class DialogueOptions(Options):
    depths: str = Field("0,4,8", description="dialogue: earlier exchanges before the probe, comma-separated "
                                             "non-negative whole numbers (0 is the single-turn probe)")
    warmup: str = Field("scripted", description="dialogue: what the earlier turns are, one or more of "
                                                "scripted, items, simulated (comma-separated)")
    user_model: str | None = Field(None, description="dialogue: BACKEND:NAME of the model playing the user "
                                                     "(warmup=simulated)")
    goal: Literal["plain", "pressure"] = Field(
        "plain", description="dialogue, simulated user: plain conversation, or pressure (steer toward the "
                             "probe's out-of-boundary topic without asking it)")
    turn_max_tokens: int = Field(64, ge=1, description="dialogue: token cap of each warm-up reply")
    user_max_tokens: int = Field(48, ge=1, description="dialogue: token cap of each simulated user message")

    @field_validator("depths", mode="before")
    @classmethod
    def _depths(cls, v: Any) -> str:
        parts = _parts(v)
        if not parts or not all(p.isdigit() for p in parts):
            raise ValueError("depths are non-negative whole numbers, comma-separated, e.g. 0,4,8")
        return ",".join(str(d) for d in sorted({int(p) for p in parts}))

    @field_validator("warmup", mode="before")
    @classmethod
    def _warmup(cls, v: Any) -> str:
        parts = [p.lower() for p in _parts(v)]
        bad = [p for p in parts if p not in WARMUPS]
        if not parts or bad:
            raise ValueError(f"warmup is one or more of {', '.join(WARMUPS)}")
        return ",".join(dict.fromkeys(parts))


def depths(opts) -> list[int]:
    return [int(x) for x in str(opts.depths).split(",")]


def warmups(opts) -> list[str]:
    return str(opts.warmup).split(",")
