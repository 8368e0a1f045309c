"""The local executor: up to --parallel runs at once on this machine, each writing its own run
folder as `rolebound run` does. With more than one, each run is its own process, so the local
engines share the cores through the thread registry (threads.py) as separate commands would,
and runs against one endpoint share its cap through semaphores of one manager process."""

from __future__ import annotations

import asyncio
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from ..io import read_regular
from ..store import MANIFEST, RECORDS, complete_lines
from .plan import Plan, PlannedRun
from .table import Tally


def _process_run(kwargs: dict[str, Any], sems: dict[str, Any]) -> dict[str, Any]:
    from .. import limits
    from .worker import run_one

    if sems:
        async def acquire(key: str):
            sem = sems.get(key)
            if sem is None:
                return None
            while not sem.acquire(False):       # a manager proxy blocks its thread: poll instead
                await asyncio.sleep(0.003)
            return sem

        async def release(key: str, sem) -> None:
            if sem is not None:
                sem.release()

        limits.install(acquire, release)
    return run_one(kwargs)


class _Watch:
    """Progress of a run read from its folder as it grows."""

    def __init__(self, out: Path):
        self.out, self.offset, self.mtime = out, 0, None
        self.tally = Tally()

    def poll(self) -> None:
        chunk = complete_lines(self.out / RECORDS, self.offset)
        if chunk:
            self.offset += len(chunk)
            self.tally.feed(chunk)
        man = self.out / MANIFEST
        try:
            mt = man.stat().st_mtime_ns
            if mt != self.mtime:
                self.mtime = mt
                self.tally.manifest(read_regular(man).decode("utf-8"))
        except (OSError, ValueError):
            pass


def execute(plan: Plan, todo: list[PlannedRun], *, parallel: int, on_tick) -> dict[str, dict[str, Any]]:
    watches = {r.key: _Watch(r.out) for r in plan.runs}
    for w in watches.values():
        w.poll()
    outcomes: dict[str, dict[str, Any]] = {}
    manager = None
    if parallel > 1:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        sems: dict[str, Any] = {}
        if plan.limits:
            manager = ctx.Manager()
            sems = {k: manager.BoundedSemaphore(v) for k, v in plan.limits.items()}
        pool: Any = ProcessPoolExecutor(max_workers=parallel, mp_context=ctx)
        submit = lambda r: pool.submit(_process_run, r.kwargs, sems)     # noqa: E731
    else:
        from .worker import run_one

        pool = ThreadPoolExecutor(max_workers=1)
        submit = lambda r: pool.submit(run_one, r.kwargs)                # noqa: E731
    try:
        futures: dict[Future, PlannedRun] = {}
        for r in todo:
            futures[submit(r)] = r
        started: set[str] = set()
        while futures:
            done, _ = wait(list(futures), timeout=0.25, return_when=FIRST_COMPLETED)
            for key, w in watches.items():
                w.poll()
                if key not in started and key not in outcomes and (w.out / MANIFEST).exists() \
                        and any(f for f, r in futures.items() if r.key == key and f.running()):
                    started.add(key)
                    w.tally.start()
            for f in done:
                r = futures.pop(f)
                try:
                    outcomes[r.key] = f.result()
                except Exception as exc:  # noqa: BLE001 - e.g. its process was killed
                    outcomes[r.key] = {"status": "error", "exit_code": 3,
                                       "message": f"the run's process failed: {type(exc).__name__}: {exc}"}
                watches[r.key].poll()
                watches[r.key].tally.start()
                watches[r.key].tally.end(outcomes[r.key]["status"])
            on_tick({k: w.tally for k, w in watches.items()}, outcomes)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if manager is not None:
            manager.shutdown()
    return outcomes
