"""The parts of a run's metrics.json that the card reads itself (not through a suite's
card_figures), checked as input: a hand-edited file is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InputError
from ..io import validate_record


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
    slope: Optional[float] = Field(None, ge=-400, le=400)
    lo: Optional[float] = Field(None, ge=-400, le=400)
    hi: Optional[float] = Field(None, ge=-400, le=400)
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
