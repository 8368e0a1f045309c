"""A suite's scripted warm-up bank (`suites/<name>/data/dialogue.yaml`): data we author, each
entry with its `source` or `note` and `validated: false`.

    source: ...            # where the bank comes from
    validated: false
    generic: [{id, text, note|source, validated}]      # fills any dialogue, after the role's own
    roles: {<role id>: [{id, text, source|note, validated}]}   # the role's own turns, first
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..suites.base import Authored
from ..io import read_yaml, validate_yaml
from .run import Turn, cycle_to


class Entry(Authored):
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)


class Bank(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    validated: bool = False
    generic: list[Entry] = Field(default_factory=list)
    roles: dict[str, list[Entry]] = Field(default_factory=dict)


@lru_cache(maxsize=8)
def load_bank(path: str) -> Bank:
    return validate_yaml(Bank, read_yaml(Path(path)), file=Path(path))


def scripted_turns(path: str | Path, role: str, n: int) -> list[Turn]:
    """The role's own turns, then the generic ones, repeated in order up to n."""
    bank = load_bank(str(path))
    return cycle_to([Turn(e.text, f"scripted:{e.id}") for e in bank.roles.get(role, []) + bank.generic], n)
