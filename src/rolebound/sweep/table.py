"""One live progress table for a whole sweep (rich), from the records as they arrive.

A run's progress is counted from its records: a job (item x strategy x repeat) is done once a
record of it arrived; failed calls are the calls whose last record is an error. The total comes
from the run's manifest (items x strategies x repeats).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ..term import visible


@dataclass
class Tally:
    total: int | None = None
    jobs: set = field(default_factory=set)
    failed: dict = field(default_factory=dict)     # call_id -> last record failed
    calls: int = 0
    status: str = "waiting"
    t0: float | None = None
    t_end: float | None = None
    base: int = 0                                  # jobs already done when this pass started

    def feed(self, data: bytes) -> None:
        for line in data.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.calls += 1
            self.jobs.add((rec.get("item_id"), rec.get("strategy"), rec.get("repeat")))
            self.failed[rec.get("call_id")] = rec.get("error") is not None

    def manifest(self, text: str | bytes | None) -> None:
        try:
            m = json.loads(text) if text else None
        except ValueError:
            return
        try:
            if m:
                self.total = int(m.get("n_items", 0)) * len(m.get("strategies") or [1]) * int(m.get("repeats", 1))
        except (AttributeError, TypeError, ValueError, OverflowError):
            pass        # no manifest yet, or one this table cannot count: the total stays unknown

    def start(self) -> None:
        if self.t0 is None:
            self.t0, self.base = time.time(), len(self.jobs)
        self.status = "running"

    def end(self, status: str) -> None:
        self.status, self.t_end = status, time.time()

    @property
    def done(self) -> int:
        return min(len(self.jobs), self.total) if self.total else len(self.jobs)

    def row(self) -> dict[str, Any]:
        n_failed = sum(self.failed.values())
        rate = eta = None
        if self.t0 is not None:
            el = (self.t_end or time.time()) - self.t0
            new = self.done - self.base
            rate = new / el if el > 0 and new > 0 else None
            if rate and self.total and self.status == "running":
                eta = (self.total - self.done) / rate
        return {"status": self.status, "done": self.done, "total": self.total, "failed": n_failed,
                "rate": rate, "eta": eta}


class SweepTable:
    """A rich Live table on a terminal; elsewhere a line per finished run and one every 30 s."""

    def __init__(self, labels: dict[str, str], enabled: bool = True):
        self.labels, self.enabled = labels, enabled
        self.live = None
        self.last_line = 0.0
        self.reported: set[str] = set()

    def __enter__(self) -> "SweepTable":
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, tallies: dict[str, Tally]) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.live.update(self._table(tallies))
            return
        now = time.time()
        for key, t in tallies.items():
            if t.t_end is not None and key not in self.reported:
                self.reported.add(key)
                print(visible(f"sweep: {self.labels[key]}: {_line(t.row())}", newlines=False), file=sys.stderr,
                      flush=True)
        if now - self.last_line > 30:
            self.last_line = now
            done = sum(t.done for t in tallies.values())
            total = sum(t.total or 0 for t in tallies.values())
            running = sum(t.status == "running" for t in tallies.values())
            print(f"sweep: {done}/{total} jobs, {running} run(s) going", file=sys.stderr, flush=True)

    def _table(self, tallies: dict[str, Tally]):
        from rich.table import Table
        from rich.text import Text          # plain text: a run's name is never read as markup

        t = Table(title="sweep", expand=False)
        for col in ("run", "status", "done/total", "rate", "ETA", "failed calls"):
            t.add_column(col, justify="left" if col in ("run", "status") else "right")
        for key, tally in tallies.items():
            r = tally.row()
            t.add_row(Text(visible(self.labels[key])), Text(r["status"]), f"{r['done']}/{r['total'] if r['total'] is not None else '?'}",
                      f"{r['rate']:.2f}/s" if r["rate"] else "-", f"{r['eta']:.0f} s" if r["eta"] else "-",
                      str(r["failed"]))
        return t


def _line(r: dict[str, Any]) -> str:
    return (f"{r['status']}, {r['done']}/{r['total'] if r['total'] is not None else '?'} jobs, "
            f"{r['failed']} failed call(s)")
