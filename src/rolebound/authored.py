"""Data we author carries where it comes from and whether a review checked it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_serializer, model_validator


class Authored(BaseModel):
    """`source` or `note` (at least one), and `validated` (false until a review says otherwise).
    Unknown fields are refused: a misspelt `soruce` must not pass as data without provenance."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = None
    note: str | None = None
    validated: bool = False

    @model_validator(mode="after")
    def _provenance(self):
        if not (self.source or self.note):
            raise ValueError("give a `source` or a `note` (where this text comes from)")
        return self

    @model_serializer(mode="wrap")
    def _provenance_last(self, handler) -> dict[str, Any]:
        # inherited fields come first in pydantic; files we write read better with the data first
        data = handler(self)
        return {**{k: v for k, v in data.items() if k not in _PROVENANCE},
                **{k: data[k] for k in _PROVENANCE if k in data}}


_PROVENANCE = ("source", "note", "validated")
