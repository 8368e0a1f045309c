"""What the call loop (runner.bounded) stands on: the stop signals (Ctrl-C, SIGTERM, SIGHUP), the
flag the local engines check between forward passes, the default concurrency, and the progress
bar with rate and ETA (rich; plain periodic lines when stderr is not a terminal)."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
import weakref
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


# -- the progress bar -------------------------------------------------------------------------
INSTANT_S = 1.0   # items done this soon after the start were resumed or cached: left out of the rate


_LIVE: "weakref.WeakSet[_PlainProgress]" = weakref.WeakSet()


def rate_from_now() -> None:
    """A local engine loads at the first call the cache cannot answer, inside the items: the plain
    bars' rate (a cumulative one) then counts from the end of the load, so that the load's seconds
    do not stretch the ETA of the whole run. rich's bar estimates its speed over a recent window
    and needs nothing."""
    t = time.perf_counter()
    for bar in list(_LIVE):
        bar.base = (t, bar.done)
        bar.restarted = True


class _PlainProgress:
    """For logs and CI: a line every 10% (or 30 s), with rate and ETA."""

    def __init__(self, total: int, label: str, unit: str = "items", note: str = ""):
        self.total, self.label, self.done, self.unit, self.note = total, label, 0, unit, note
        self.t0 = time.perf_counter()
        self.last_pct, self.last_t = -1, self.t0
        self.base = (self.t0, 0)      # the rate counts from here: after the instant items
        self.restarted = False        # rate_from_now moved the base
        _LIVE.add(self)

    def rate(self, t: float) -> float:
        """Items/s since the instant items (a resumed run's recorded ones) were counted; a cumulative
        rate, so items that finish in batches do not swing it."""
        t0, d0 = self.base if self.restarted or t - self.t0 > INSTANT_S else (self.t0, 0)
        return (self.done - d0) / (t - t0) if t > t0 else 0.0

    def start(self):
        print(f"{self.label}: {self.total} {self.unit}{self.note}", file=sys.stderr, flush=True)

    def advance(self, _task=None, n: int = 1):
        self.done += n
        pct = int(100 * self.done / max(1, self.total)) // 10
        t = time.perf_counter()
        if t - self.t0 <= INSTANT_S and not self.restarted:
            self.base = (t, self.done)
        if pct != self.last_pct or t - self.last_t > 30 or self.done == self.total:
            el = t - self.t0
            rate = self.rate(t)
            eta = (self.total - self.done) / rate if rate > 0 else float("nan")
            print(f"{self.label}: {self.done}/{self.total} {self.unit}, {rate:.2f} {self.unit}/s, "
                  f"elapsed {el:.0f}s, ETA {eta:.0f}s", file=sys.stderr, flush=True)
            self.last_pct, self.last_t = pct, t

    def stop(self):
        _LIVE.discard(self)


def make_progress(total: int, label: str, enabled: bool = True, unit: str = "items", note: str = ""):
    """unit: what is counted ("items", or "jobs" where each item runs under several strategies);
    note: said once after the total (what a job is)."""
    if not enabled or total == 0:
        return None, None
    if not sys.stderr.isatty():
        p = _PlainProgress(total, label, unit, note)
        return p, None
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    class RateColumn(TextColumn):
        def render(self, task):
            speed = task.finished_speed or task.speed
            from rich.text import Text

            return Text(f"{speed:.2f} {unit}/s" if speed else f"- {unit}/s")

    prog = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TaskProgressColumn(), RateColumn(""), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=False)
    task = prog.add_task(label + note, total=total)
    return prog, task
