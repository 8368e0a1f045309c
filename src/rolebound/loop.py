"""The one bounded call loop: every job as a task, at most `concurrency` at a time, one progress
bar (rate and ETA). The runner, re-judging and the builds all use it."""

from __future__ import annotations

import asyncio
import signal
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Awaitable, Callable, Iterator, Sequence


LOCAL_CONCURRENCY = 256    # local engines batch what is in flight: many items help
API_CONCURRENCY = 16       # requests in flight to an API (the openai backend's default too)


def default_concurrency(backend) -> int:
    return LOCAL_CONCURRENCY if getattr(backend, "batching", False) else API_CONCURRENCY


@contextmanager
def sigterm_as_interrupt() -> Iterator[SimpleNamespace]:
    """SIGTERM (`kill`, a scheduler stopping the job) takes Ctrl-C's path: the calls in flight are
    cancelled, what is done is written and the resume line printed; `.hit` says it came."""
    state = SimpleNamespace(hit=False)
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def on_term(signum, frame):
        state.hit = True
        handler = signal.getsignal(signal.SIGINT)     # asyncio.run's own while it runs
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, old)


async def bounded(jobs: Sequence[Any], fn: Callable[[Any], Awaitable[Any]], *, concurrency: int,
                  label: str = "", progress: bool = False, unit: str = "items",
                  note: str = "") -> list[Any]:
    """`await fn(job)` for every job, in order of the results as the jobs were given. An exception
    out of `fn` (fn handles the ones it expects) or Ctrl-C cancels the jobs still waiting."""
    from .progress import make_progress

    sem = asyncio.Semaphore(max(1, concurrency))
    prog, task = make_progress(len(jobs), label, enabled=progress, unit=unit, note=note)

    async def one(job):
        async with sem:
            result = await fn(job)
        if prog:     # a finished job only: jobs cancelled by Ctrl-C are not counted as done
            prog.advance(task)
        return result

    tasks = [asyncio.create_task(one(j)) for j in jobs]
    try:
        if prog:
            prog.start()
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if prog:
            prog.stop()
