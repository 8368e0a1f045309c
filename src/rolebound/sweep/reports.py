"""Metrics and reports of the runs a Ray sweep brings back as records, built on the driver from
records.jsonl alone (as `rolebound report` would), one run at a time in a background thread as
soon as each run's task returns. Built after the last task instead, they were a serial tail of
about a second per run that nothing overlapped (docs/scale.md, "Measured")."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .plan import PlannedRun

REPORTED = ("done", "failed calls", "stopped")


def build(run: PlannedRun, outcome: dict[str, Any]) -> None:
    """metrics.json and the report of one run; a report that fails makes the run an error."""
    from .. import api
    from ..errors import RoleboundError

    if outcome.get("status") not in REPORTED or not (run.out / "records.jsonl").exists():
        return
    try:
        api.build_report(run.out)
    except RoleboundError as exc:
        outcome.update(status="error", message=f"report: {exc}", exit_code=max(3, outcome.get("exit_code", 0)))
    except Exception as exc:  # noqa: BLE001 - a stopped run may lack what a metric needs
        if outcome.get("status") != "stopped":
            outcome.update(status="error", message=f"report: {type(exc).__name__}: {exc}", exit_code=3)


class Reports:
    """`submit(run, outcome)` as each task returns; leaving the block waits for every report (or,
    on an error or Ctrl-C, for the one being built and drops the rest: rerunning builds them)."""

    def __init__(self) -> None:
        # one thread: the reports never compete with each other, and matplotlib draws in one thread
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rolebound-report")
        self.futures: list[Future] = []

    def submit(self, run: PlannedRun, outcome: dict[str, Any]) -> None:
        self.futures.append(self.pool.submit(build, run, outcome))

    def __enter__(self) -> "Reports":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.pool.shutdown(wait=True, cancel_futures=exc_type is not None)
        if exc_type is None:
            for f in self.futures:
                f.result()
