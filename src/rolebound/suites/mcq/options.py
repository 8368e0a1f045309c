"""The mcq suite's `--set` options and its per-run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ..base import Options, RunState


class MCQOptions(Options):
    template_file: str | None = Field(None, description="Jinja2 prompt template file")
    template: str | None = Field(None, description="Jinja2 prompt template text (when no template_file)")
    chat: bool = Field(True, description="send the prompt as a chat message (false: raw completion)")
    group: str | None = Field(None, description="item field whose values split the accuracy table")
    max_tokens: int = Field(32, ge=1, description="token limit of generated answers")
    stop_newline: bool = Field(True, description="stop generation at the first newline")


@dataclass
class MCQState(RunState):
    template: Any = None        # the compiled prompt template the run renders (a jinja2 Template)
