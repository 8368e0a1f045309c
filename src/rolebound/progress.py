"""A progress bar with items/s and ETA (rich); plain periodic lines when stderr is not a terminal."""

from __future__ import annotations

import sys
import time

INSTANT_S = 1.0   # items done this soon after the start were resumed or cached: left out of the rate


class _PlainProgress:
    """For logs and CI: a line every 10% (or 30 s), with rate and ETA."""

    def __init__(self, total: int, label: str, unit: str = "items", note: str = ""):
        self.total, self.label, self.done, self.unit, self.note = total, label, 0, unit, note
        self.t0 = time.perf_counter()
        self.last_pct, self.last_t = -1, self.t0
        self.base = (self.t0, 0)      # the rate counts from here: after the instant items

    def rate(self, t: float) -> float:
        """Items/s since the instant items (a resumed run's recorded ones) were counted; a cumulative
        rate, so items that finish in batches do not swing it."""
        t0, d0 = self.base if t - self.t0 > INSTANT_S else (self.t0, 0)
        return (self.done - d0) / (t - t0) if t > t0 else 0.0

    def start(self):
        print(f"{self.label}: {self.total} {self.unit}{self.note}", file=sys.stderr, flush=True)

    def advance(self, _task=None, n: int = 1):
        self.done += n
        pct = int(100 * self.done / max(1, self.total)) // 10
        t = time.perf_counter()
        if t - self.t0 <= INSTANT_S:
            self.base = (t, self.done)
        if pct != self.last_pct or t - self.last_t > 30 or self.done == self.total:
            el = t - self.t0
            rate = self.rate(t)
            eta = (self.total - self.done) / rate if rate > 0 else float("nan")
            print(f"{self.label}: {self.done}/{self.total} {self.unit}, {rate:.2f} {self.unit}/s, "
                  f"elapsed {el:.0f}s, ETA {eta:.0f}s", file=sys.stderr, flush=True)
            self.last_pct, self.last_t = pct, t

    def stop(self):
        pass


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
