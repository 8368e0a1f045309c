"""Stopping a run: the stop signals (Ctrl-C, SIGTERM, SIGHUP), the flag the local engines check
between forward passes, and the default concurrency. The call loop itself is runner.bounded."""

from __future__ import annotations

import asyncio
import signal
import threading
from contextlib import contextmanager
from typing import Any, Awaitable, Iterator


LOCAL_CONCURRENCY = 256    # local engines batch what is in flight: many items help
API_CONCURRENCY = 16       # requests in flight to an API (the openai backend's default too)


def default_concurrency(backend) -> int:
    return LOCAL_CONCURRENCY if getattr(backend, "batching", False) else API_CONCURRENCY


# Set when the run is stopped (Ctrl-C, SIGTERM, SIGHUP): the local engines' worker threads end their
# batch at the next forward pass instead of running it to its end (a stopped run waited for a whole
# batch, minutes on a CPU, before it could exit), and API backends send no new request.
STOP = threading.Event()


class EngineStopped(BaseException):
    """The run is stopping: no new request starts, a batch is left unfinished (its calls get no
    record, and run on resume). Not an Exception, so no backend records it as a failed call."""


def check_stop() -> None:
    if STOP.is_set():
        raise EngineStopped("the run is stopping")


STOP_GRACE_S = 1.0     # after a stop, how long a call in flight may still bring its reply in
LAST_STOP = {"code": None}     # the exit code of the last stop signal (130 SIGINT, 143 SIGTERM/SIGHUP)


class StopState:
    """What the stop signals said: `code` (None: no signal yet) and how many came. Inside the
    event loop (`attach`) a signal cancels the run's main task; outside it the signal waits for
    the caller to look (the manifest and the report are being written, which takes seconds)."""

    def __init__(self):
        self.code: int | None = None
        self.count = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task | None = None

    def hit(self, signum: int) -> None:
        self.count += 1
        if self.code is None:
            self.code = 130 if signum == signal.SIGINT else 143
        LAST_STOP["code"] = self.code
        STOP.set()          # local engines end their batch at the next forward pass
        loop, task = self.loop, self.task
        if self.count >= 3:
            # a third signal: something did not stop (a blocking call in this thread); leave now
            raise KeyboardInterrupt
        if loop is not None and task is not None and not loop.is_closed():
            # the first cancels the run's calls (those in flight get STOP_GRACE_S to bring their
            # reply in); the second cancels that wait too
            loop.call_soon_threadsafe(task.cancel)

    def watch(self) -> None:
        """From inside the task a stop signal should cancel (the run's main task)."""
        if self.code is not None:       # a signal came before the loop started
            raise asyncio.CancelledError
        self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()

    def unwatch(self) -> None:
        self.loop = self.task = None

    async def attach(self, coro: Awaitable[Any]) -> Any:
        """Run `coro` as the task a stop signal cancels."""
        try:
            self.watch()
        except asyncio.CancelledError:
            getattr(coro, "close", lambda: None)()
            raise
        try:
            return await coro
        finally:
            self.unwatch()


def signalled() -> bool:
    """A stop signal came during the current run (its calls in flight get STOP_GRACE_S)."""
    return any(st.code is not None for st in _ACTIVE)


_ACTIVE: list[StopState] = []
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextmanager
def stop_signals() -> Iterator[StopState]:
    """Ctrl-C (SIGINT), SIGTERM (`kill`, a scheduler stopping the job) and SIGHUP (the terminal
    closed) all stop a run the same way: the calls in flight are cancelled, what is done is
    written and the resume line printed. A signal the process inherited as ignored (nohup, a
    background job of a script) stays ignored."""
    state = StopState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    STOP.clear()
    LAST_STOP["code"] = None

    def on_signal(signum, frame):
        state.hit(signum)

    old = {}
    _ACTIVE.append(state)
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, on_signal)
    try:
        yield state
    finally:
        _ACTIVE.remove(state)
        STOP.clear()        # the engines' threads have let go (asyncio.run waited for them)
        for sig, handler in old.items():
            signal.signal(sig, handler)
