"""The mcq suite's items: one JSONL line each; the answer may be a letter, a 0-based index or the
option's text (stored as its letter)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...records import LETTERS
from ...errors import InputError
from ...io import read_jsonl


class MCQItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    question: str
    options: list[str] = Field(min_length=2, max_length=26)
    answer: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_str(cls, v):
        return str(v)

    @model_validator(mode="before")
    @classmethod
    def _answer_letter(cls, data: Any):
        if not isinstance(data, dict) or "options" not in data or "answer" not in data:
            return data
        ans, opts = data["answer"], data["options"]
        if isinstance(ans, bool):
            raise ValueError("answer must be a letter, an index or an option's text")
        if isinstance(ans, int):
            if not 0 <= ans < len(opts):
                raise ValueError(f"answer index {ans} is outside the {len(opts)} options")
            data = {**data, "answer": LETTERS[ans]}
        elif isinstance(ans, str) and len(ans.strip()) == 1 and ans.strip().upper() in LETTERS[: len(opts)]:
            data = {**data, "answer": ans.strip().upper()}
        elif isinstance(ans, str) and ans in opts:
            data = {**data, "answer": LETTERS[opts.index(ans)]}
        else:
            raise ValueError(f"answer {ans!r} is not a letter A-{LETTERS[len(opts) - 1]}, an index or an option")
        return data


def load_items(path: str) -> list[MCQItem]:
    """The file's items; a repeated id is an InputError."""
    items = read_jsonl(path, MCQItem)
    seen = set()
    for it in items:
        if it.id in seen:
            raise InputError(f"duplicate id '{it.id}'", file=path, field="id")
        seen.add(it.id)
    return items
