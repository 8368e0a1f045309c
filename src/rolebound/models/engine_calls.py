"""What the two in-process engines (torch, llamacpp) share as backends: their synchronous engine
runs on a worker thread, and a batch that fails as a whole is retried item by item."""

from __future__ import annotations

import asyncio

from ..loop import EngineStopped, check_stop  # noqa: F401 - the stop check lives with the signals (loop.py)
from .base import GenResult, ScoreResult


def run_safe(fn, requests, *args, cls, emit=None):
    """Run a batch; if it fails as a whole, retry item by item so the error stays local
    (results already emitted stand; the runner ignores a second answer for them)."""
    try:
        return fn(requests, *args, emit=emit)
    except EngineStopped:
        raise
    except Exception:  # noqa: BLE001
        if len(requests) == 1:
            import traceback

            return [cls(error=traceback.format_exc(limit=2).strip().splitlines()[-1])]
        out = []
        for r in requests:
            out.extend(run_safe(fn, [r], *args, cls=cls))
        return out


def split_all(split, requests, emit=None) -> tuple[list, dict[int, tuple[list[int], list[list[int]]]]]:
    """Each scoring request's (context ids, continuation ids) by `split`; a request that cannot be
    split gets its error result at once (and is emitted), the others are left None in `out`."""
    out: list[ScoreResult | None] = [None] * len(requests)
    prepared = {}
    for i, req in enumerate(requests):
        try:
            prepared[i] = split(req)
        except Exception as exc:  # noqa: BLE001 - recorded per request
            out[i] = ScoreResult(error=f"{type(exc).__name__}: {exc}")
            if emit:
                emit(i, out[i])
    return out, prepared


class EngineCalls:
    """Backend methods over `self.engine` (loaded on first use, on the worker thread)."""

    engine: object

    async def prepare(self) -> None:
        await asyncio.to_thread(lambda: self.engine)

    async def generate(self, requests, decoding, emit=None):
        return await asyncio.to_thread(run_safe, self.engine.generate, requests, decoding, cls=GenResult, emit=emit)

    async def score(self, requests, emit=None):
        return await asyncio.to_thread(run_safe, self.engine.score, requests, cls=ScoreResult, emit=emit)

    def count_tokens(self, text: str) -> int:
        return len(self.engine.encode(text))
