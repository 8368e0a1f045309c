"""One run of a sweep, wherever it executes: api.run, its outcome as a small dict.

`call_run` is the one place the sweep calls api.run: the RunRequest the grid config made, carried
as the JSON of its set fields (so a Ray task can take it).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from ..errors import RoleboundError, RunStopped
from ..io import read_regular
from ..store import MANIFEST, RECORDS, complete_lines


def call_run(kwargs: dict[str, Any], *, report: bool):
    from .. import api
    from ..request import make_request

    return api.run(make_request({**kwargs, "progress": False, "report": report}))


def run_one(kwargs: dict[str, Any], *, report: bool = True) -> dict[str, Any]:
    """Never raises for what a run can go through (bad option, endpoint down): the sweep goes on
    and the index says what happened. wall_s: the run itself, as api.run timed it."""
    import time

    t0 = time.perf_counter()
    try:
        res = call_run(kwargs, report=report)
    except RunStopped as exc:
        return {"status": "stopped", "message": str(exc), "exit_code": exc.exit_code,
                "wall_s": round(time.perf_counter() - t0, 3)}
    except RoleboundError as exc:
        return {"status": "error", "message": str(exc), "exit_code": exc.exit_code,
                "wall_s": round(time.perf_counter() - t0, 3)}
    failed = res.counts.errors + res.counts.items_failed
    return {"status": "failed calls" if failed else "done", "wall_s": round(res.wall_s, 3),
            "failed_calls": res.counts.errors,
            "failed_items": res.counts.items_failed, "exit_code": 3 if failed else 0,
            "message": f"{res.counts.errors} failed call(s), {res.counts.items_failed} failed item(s)"
                       if failed else ""}


class Tailer(threading.Thread):
    """Sends the lines appended to a run's records.jsonl (whole lines only) and its manifest when
    it changes, every `period` seconds and once more at stop()."""

    def __init__(self, folder: Path, send: Callable[[bytes, str | None], None], offset: int = 0,
                 period: float = 0.2):
        super().__init__(daemon=True)
        self.folder, self.send, self.offset, self.period = folder, send, offset, period
        self._stop_ev = threading.Event()
        self._manifest: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        while not self._stop_ev.wait(self.period):
            try:
                self.flush()
            except BaseException as exc:  # noqa: BLE001 - reported by stop()
                self.error = exc
                return

    def stop(self) -> None:
        self._stop_ev.set()
        self.join()
        if self.error is None:
            self.flush()
        if self.error is not None:
            raise self.error

    def flush(self) -> None:
        data = complete_lines(self.folder / RECORDS, self.offset)
        manifest = None
        try:
            text = read_regular(self.folder / MANIFEST).decode("utf-8")
            json.loads(text)                      # whole (it is replaced by rename, but be sure)
            if text != self._manifest:
                manifest = text
        except (OSError, ValueError):
            pass
        if data or manifest:
            self.send(data, manifest)
            self.offset += len(data)
            if manifest:
                self._manifest = manifest
