"""The parts of a run's metrics.json that the card reads itself (not through a suite's
card_figures), and a card.json that `card --compare` reads back, checked as input: a hand-edited
file is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InputError
from ..io import validate_record
from ..report.fmt import PCT, check_figure


# a dialogue drift slope, in points per 4 turns: at most 100 points between depths a turn apart
DRIFT_DOMAIN = (-400.0, 400.0)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class PositionBias(_Loose):
    warnings: list[str] = []


class DepthRow(_Loose):
    depth: int = Field(ge=0)
    rate: Optional[float] = Field(None, ge=0, le=100)
    lo: Optional[float] = Field(None, ge=0, le=100)
    hi: Optional[float] = Field(None, ge=0, le=100)
    n: Optional[int] = Field(None, ge=0)


class Drift(_Loose):       # points per 4 turns (dialogue.metrics.drift)
    slope: Optional[float] = Field(None, ge=DRIFT_DOMAIN[0], le=DRIFT_DOMAIN[1])
    lo: Optional[float] = Field(None, ge=DRIFT_DOMAIN[0], le=DRIFT_DOMAIN[1])
    hi: Optional[float] = Field(None, ge=DRIFT_DOMAIN[0], le=DRIFT_DOMAIN[1])
    n: Optional[int] = Field(None, ge=0)


class Series(_Loose):
    rows: list[DepthRow]
    drift: Optional[Drift] = None


class Dialogue(_Loose):
    depths: list[int]
    names: list[str]
    metrics: dict[str, dict[str, Series]]


def check_metrics(metrics: Any, path: Path) -> dict[str, Any]:
    """metrics.json's position-bias warnings and dialogue block, or an InputError naming the field."""
    if not isinstance(metrics, dict):
        raise InputError(f"expected a JSON object, got {type(metrics).__name__}", file=str(path))
    for key, model in (("position_bias", PositionBias), ("dialogue", Dialogue)):
        if metrics.get(key) not in (None, {}):
            validate_record(model, metrics[key], file=path, line=None, loc_prefix=(key,))
    return metrics


class CardFigure(_Loose):
    key: str
    label: str
    unit: str = PCT
    value: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    spread: Optional[float] = None
    n: Optional[int] = None
    why: str = ""

    @model_validator(mode="after")
    def _in_domain(self):
        domain = DRIFT_DOMAIN if self.key.startswith("drift/") else None
        check_figure(self.key, self.unit, domain, value=self.value, lo=self.lo, hi=self.hi, spread=self.spread, n=self.n)
        return self


class CardSuite(_Loose):
    suite: str
    title: str = ""
    protocol: str = "none"
    judge: Optional[str] = None
    self_judged: bool = False
    finding: str = ""
    figures: list[CardFigure] = []


class CardFile(_Loose):
    card: Literal[1]
    model: str
    created: str = ""
    demo: bool = False
    suites: list[CardSuite]


def check_card(card: Any, path: Path) -> dict[str, Any]:
    """A card.json read back (`card --compare`), or an InputError naming the field."""
    validate_record(CardFile, card, file=path, line=None)
    return card
