"""A shared cap on requests in flight per API endpoint, across runs (and, in a Ray sweep, machines).

The openai backend takes a slot here around every HTTP request, on top of its own per-run
semaphore. With nothing installed a slot costs nothing; `rolebound sweep` installs a gate that
asks a limiter (a Ray actor, or a semaphore shared by the local executor's processes).
"""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable

# acquire(base_url) -> a handle, release(base_url, handle); none installed: no shared cap here
Gate = tuple[Callable[[str], Awaitable[Any]], Callable[[str, Any], Awaitable[None]]]
_GATE: list[Gate] = []


def install(acquire: Callable[[str], Awaitable[Any]], release: Callable[[str, Any], Awaitable[None]]) -> None:
    _GATE[:] = [(acquire, release)]


def clear() -> None:
    _GATE.clear()


@contextlib.asynccontextmanager
async def slot(base_url: str | None) -> AsyncIterator[None]:
    if not _GATE:
        yield
        return
    acquire, release = _GATE[0]
    key = base_url or "default"
    handle = await acquire(key)
    try:
        yield
    finally:
        await release(key, handle)
