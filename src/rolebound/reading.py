"""Reading: what an answer-extraction rule read from a reply. Beneath both the runner (which
stores a reading's rule and span in a record) and scoring (whose rules make readings)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """What a rule read: `value` (option index, "Yes"/"No", or None), the rule's name, the span."""

    value: int | str | None
    rule: str
    span: str = ""

    def as_meta(self) -> dict:
        return {"rule": self.rule, "span": self.span[:160]}
