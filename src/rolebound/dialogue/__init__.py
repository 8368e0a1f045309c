"""Boundaries over a conversation: a suite's probe asked after N earlier exchanges in one chat.

Here: what a suite imports to offer the strategy (its name, the `--set` options every dialogue
strategy shares, the report's hooks); the modules below load only for a dialogue run.
run.py      plans (who talks about what), the warm-up turns (`turn@k` records), the probes by depth
budget.py   the before-any-call checks: a user model for `simulated`, the context window
metrics.py  pure: probe records -> by-depth rates, the paired change from depth 0, drift slope
report.py   the depth tables and the drift figure (report and card)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ..suites.base import Options

STRATEGY = "dialogue"
DESCRIPTION = "the probe asked after N earlier exchanges in one chat (--set depths=0,4,8 warmup=scripted)"

# -- the `--set` options every suite that offers the strategy shares --------------------------------
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


# What every suite's report calls: report.py (and its figure code) loads only for a run with
# dialogue probes.
def add_sections(rep, m: dict | None) -> None:
    """report.add_sections: the depth table and the drift figure (nothing without dialogue probes)."""
    if m:
        from .report import add_sections as add

        add(rep, m)


def summary_lines(m: dict | None) -> list[tuple[str, str]]:
    """report.summary_lines: each metric's rate by depth and its drift ([] without dialogue probes)."""
    if not m:
        return []
    from .report import summary_lines as lines

    return lines(m)
