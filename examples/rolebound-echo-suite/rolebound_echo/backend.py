"""The `reverse` backend: answers with the last message reversed (no model at all)."""

from __future__ import annotations

from typing import Sequence

from rolebound.models.base import CHAT, Backend, GenRequest, GenResult
from rolebound.records import Decoding


class ReverseBackend(Backend):
    """Declared as the `reverse` entry point (pyproject.toml): `--model reverse:NAME`."""

    description = "answers with the last message reversed (example plugin; any name)"
    capabilities = frozenset({CHAT})
    default_name = "any"         # `--model reverse` alone means reverse:any

    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        out = []
        for r in requests:
            text = r.messages[-1].content if r.messages else (r.prompt or "")
            out.append(GenResult(text=text[::-1], finish_reason="stop"))
        return out
