"""The Ray executor: each run of the sweep is one Ray task; its records stream back to a sink
actor on the driver's node, which alone writes the run folders (no shared disk needed).

A task starts from the records the sink holds (so a retried task resumes: nothing lost), runs
api.run in a scratch folder on its worker, and sends every whole line appended to records.jsonl
as it appears. Each attempt gets a token from the sink; lines from an older attempt of the same
run are refused, so nothing is written twice.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import InputError, RoleboundError, RunStopped
from ..io import read_regular
from ..store import MANIFEST, RECORDS, RunDir, claim_run_folder
from .plan import Plan, PlannedRun
from .table import Tally

INSTALL_HINT = "the ray executor needs Ray: pip install 'rolebound[ray]'"
FILES = (MANIFEST, RECORDS, "errors.log")
LEASE_S = 900.0          # a slot a dead task never gave back is taken back after this long


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError(INSTALL_HINT, field="--executor") from None
    return ray


class Sink:
    """Lives on the driver's node; the only writer of the sweep's run folders."""

    def __init__(self, outs: dict[str, str]):
        self.outs = {k: Path(v) for k, v in outs.items()}
        self.tokens: dict[str, str] = {}
        self.dirs: dict[str, RunDir] = {}
        self.tallies = {k: Tally() for k in outs}
        for k, p in self.outs.items():
            if (p / RECORDS).exists():
                self.tallies[k].feed(read_regular(p / RECORDS))
            if (p / MANIFEST).exists():
                self.tallies[k].manifest(read_regular(p / MANIFEST).decode("utf-8"))

    def begin(self, key: str) -> tuple[str, dict[str, bytes]]:
        """A new attempt of a run: its token and the run folder's files to resume from."""
        rd = self.dirs.get(key)
        if rd is None:
            rd = self.dirs[key] = RunDir(claim_run_folder(self.outs[key]))
            rd.lock()                      # a second sweep on the same --out is refused here
        rd.repair()
        self.tokens[key] = token = uuid.uuid4().hex
        self.tallies[key].start()
        return token, {n: (rd.path / n).read_bytes() for n in FILES if (rd.path / n).exists()}

    def append(self, key: str, token: str, data: bytes, manifest: str | None) -> bool:
        if self.tokens.get(key) != token:
            return False
        rd = self.dirs[key]
        if data:
            fd = os.open(rd.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "ab") as fh:      # never through a link (RunDir.repair refused one)
                fh.write(data)
                fh.flush()
            self.tallies[key].feed(data)
        if manifest:
            rd.write_text(MANIFEST, manifest)
            self.tallies[key].manifest(manifest)
        return True

    def finish(self, key: str, token: str, manifest: str | None, errors: str | None) -> bool:
        """The attempt's last manifest and errors.log; then the folder is free for the report."""
        if self.tokens.get(key) != token:
            return False
        rd = self.dirs.pop(key)
        if manifest:
            rd.write_text(MANIFEST, manifest)
            self.tallies[key].manifest(manifest)
        if errors:
            rd.write_text("errors.log", errors)
        else:
            rd.remove("errors.log")
        rd.unlock()
        return True

    def rows(self) -> dict[str, Tally]:
        return self.tallies


class Limiter:
    """Requests in flight per endpoint across the cluster (an async actor: one event loop)."""

    def __init__(self, limits: dict[str, int]):
        self.limits = dict(limits)
        self.held: dict[str, dict[str, float]] = {k: {} for k in limits}
        self.peak: dict[str, int] = {k: 0 for k in limits}
        self.cond = None

    async def acquire(self, key: str) -> str:
        import asyncio

        if self.cond is None:
            self.cond = asyncio.Condition()
        lease = uuid.uuid4().hex
        async with self.cond:
            while True:
                held = self.held[key]
                now = time.time()
                for k in [k for k, t in held.items() if now - t > LEASE_S]:
                    del held[k]             # its task died holding it
                if len(held) < self.limits[key]:
                    held[lease] = now
                    self.peak[key] = max(self.peak[key], len(held))
                    return lease
                try:
                    await asyncio.wait_for(self.cond.wait(), timeout=10)
                except asyncio.TimeoutError:
                    pass

    async def release(self, key: str, lease: str) -> None:
        self.held[key].pop(lease, None)
        if self.cond is not None:
            async with self.cond:
                self.cond.notify()

    async def peaks(self) -> dict[str, int]:
        return dict(self.peak)


def _gate(limiter, known: dict[str, int]):
    """acquire/release for rolebound.limits: endpoints without a cap pass straight through."""

    async def acquire(key: str) -> str | None:
        return await limiter.acquire.remote(key) if key in known else None

    async def release(key: str, lease: str | None) -> None:
        if lease is not None:
            await limiter.release.remote(key, lease)

    return acquire, release


def task_env() -> dict[str, str]:
    """The driver's ROLEBOUND_* variables a task takes (never a key, token or secret)."""
    return {k: v for k, v in os.environ.items() if k.startswith("ROLEBOUND_")
            and not any(s in k for s in ("KEY", "TOKEN", "SECRET"))}


def run_task(key: str, kwargs: dict[str, Any], sink, limiter, known: dict[str, int],
             env: dict[str, str] | None = None) -> dict[str, Any]:
    """The body of a run's Ray task (on a worker)."""
    import ray

    # set here, not as a runtime_env: Ray starts workers of their own for a job with one, so
    # the workers it has already started (one per CPU) sat idle while new ones were started
    # for the tasks, which held back every task's start by seconds (docs/scale.md, "Measured")
    os.environ.update(env or {})

    from .. import limits
    from .worker import Tailer, run_one

    token, files = ray.get(sink.begin.remote(key))
    tmp = Path(tempfile.mkdtemp(prefix="rolebound-sweep-"))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if limiter is not None:
            limits.install(*_gate(limiter, known))

        def send(data: bytes, manifest: str | None) -> None:
            if not ray.get(sink.append.remote(key, token, data, manifest)):
                raise RoleboundError(f"run {key}: a newer attempt took over")

        tail = Tailer(tmp, send, offset=len(files.get(RECORDS, b"")))
        tail.start()
        try:
            out = run_one(dict(kwargs, out=str(tmp)), report=False)
        finally:
            tail.stop()
        errors = (tmp / "errors.log").read_text(encoding="utf-8") if (tmp / "errors.log").exists() else None
        manifest = (tmp / MANIFEST).read_text(encoding="utf-8") if (tmp / MANIFEST).exists() else None
        ray.get(sink.finish.remote(key, token, manifest, errors))
        return out
    finally:
        limits.clear()
        shutil.rmtree(tmp, ignore_errors=True)


# -- the driver ------------------------------------------------------------------------------------
def connect(address: str):
    """ray.init on the cluster at `address` ('auto': the running one, else a local one started
    here; 'local': always a local one). An address that does not answer is one line, at once."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")     # no notice printed, nothing sent
    ray = import_ray()
    import logging

    kw: dict[str, Any] = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address not in ("auto", "local"):
        _reachable(address)
    if address == "auto":
        try:
            return ray, ray.init(address="auto", **kw)
        except ConnectionError:
            pass                            # no cluster running here: start one
    elif address != "local":
        try:
            return ray, ray.init(address=address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"cannot join the Ray cluster at {address}: {_first_line(exc)}",
                             field="--address") from None
    print("sweep: no Ray cluster running here; starting a local one (`ray start --head` starts one that stays)",
          file=sys.stderr)
    try:
        return ray, ray.init(include_dashboard=False, object_store_memory=200 << 20, **kw)
    except Exception as exc:  # noqa: BLE001 - e.g. its processes too slow to start on a crowded machine
        raise RunStopped(f"could not start a local Ray cluster: {_first_line(exc)}; start one with "
                         "`ray start --head` and rerun with --address auto", exit_code=3) from None


def _reachable(address: str) -> None:
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"'{address}' is not HOST:PORT (or auto, local, ray://HOST:PORT)", field="--address")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        raise InputError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one with "
                         "`ray start --head`, or use --address auto", field="--address") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def check_fits(ray, plan: Plan) -> None:
    """A run that can never be placed is an error before anything starts (Ray would wait forever)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    total_gpu = sum(n.get("GPU", 0) for n in nodes)
    node_gpu = max((n.get("GPU", 0) for n in nodes), default=0)
    node_cpu = max((n.get("CPU", 0) for n in nodes), default=0)
    for r in plan.runs:
        room = total_gpu if r.gpu_bundles else node_gpu
        if r.gpus > room:
            have = f"{int(total_gpu)} GPU(s) in all, at most {int(node_gpu)} on one node" if total_gpu else "no GPU"
            raise InputError(f"run {r.key} needs {r.gpus} GPU(s) (tensor_parallel_size x pipeline_parallel_size"
                             f"{'' if r.gpu_bundles else ', on one node'}); the Ray cluster has {have}",
                             field="model")
        if r.cpus > node_cpu:
            raise InputError(f"run {r.key} needs {r.cpus:g} CPU(s) on one node (threads); the largest node "
                             f"of the Ray cluster has {node_cpu:g}", field="threads")


def _options(ray, r: PlannedRun) -> dict[str, Any]:
    if not r.gpu_bundles:
        return {"num_cpus": r.cpus, "num_gpus": r.gpus}
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    # vLLM's own Ray workers (distributed_executor_backend=ray) take the bundles, one GPU each
    pg = placement_group([{"GPU": 1, "CPU": 1}] * r.gpus, strategy="PACK")
    ray.get(pg.ready(), timeout=300)
    return {"num_cpus": 0, "num_gpus": 0, "scheduling_strategy": PlacementGroupSchedulingStrategy(
        pg, placement_group_capture_child_tasks=True)}


def _kwargs(r: PlannedRun) -> dict[str, Any]:
    """vLLM over a placement group of several GPUs runs its workers as Ray actors."""
    if not r.gpu_bundles:
        return r.kwargs
    bo = dict(r.kwargs.get("backend_options") or {})
    bo.setdefault("distributed_executor_backend", "ray")
    return dict(r.kwargs, backend_options=bo)


def execute(plan: Plan, todo: list[PlannedRun], *, address: str, parallel: int | None,
            on_tick, retries: int = 3, on_result=None) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Run `todo` on the cluster; returns (key -> outcome, endpoint -> most requests the limiter
    let through at once). on_tick(tallies, outcomes) after each poll; on_result(run, outcome) as
    each run's task returns (its records and manifest are then all at the sink)."""
    ray, _ = connect(address)
    try:
        check_fits(ray, plan)
        return _drive(ray, plan, todo, parallel, on_tick, retries, on_result or (lambda r, o: None))
    except ray.exceptions.RayError as exc:
        raise RunStopped(f"the Ray cluster failed the sweep: {_first_line(exc)}; records kept, rerun the "
                         "same command to resume", exit_code=3) from None
    finally:
        ray.shutdown()


def _drive(ray, plan, todo, parallel, on_tick, retries, on_result):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    # a sink that dies (the node's OOM killer) comes back from the run folders; the attempts it
    # knew are refused from then on, so their runs end as errors and resume on the next sweep
    sink = ray.remote(Sink).options(num_cpus=0, scheduling_strategy=here, max_restarts=3,
                                    max_task_retries=3).remote({r.key: str(r.out) for r in plan.runs})
    limiter = ray.remote(Limiter).options(num_cpus=0, scheduling_strategy=here, max_concurrency=10000).remote(
        plan.limits) if plan.limits else None
    task = ray.remote(max_retries=retries)(run_task)
    waiting, pending, outcomes, submitted, env = list(todo), {}, {}, {}, task_env()
    while waiting or pending:
        while waiting and (not parallel or len(pending) < parallel):
            r = waiting.pop(0)
            try:
                opts = _options(ray, r)
            except Exception as exc:  # noqa: BLE001 - a placement group that never came
                outcomes[r.key] = {"status": "error", "message": f"cannot place the run: {_first_line(exc)}",
                                   "exit_code": 3}
                continue
            pending[task.options(**opts).remote(r.key, _kwargs(r), sink, limiter, plan.limits, env)] = r
            submitted[r.key] = time.perf_counter()
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.25) if pending else ([], [])
        for ref in ready:
            r = pending.pop(ref)
            try:
                outcomes[r.key] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the task failed past its retries
                outcomes[r.key] = {"status": "error", "exit_code": 3,
                                   "message": f"the Ray task failed: {_first_line(exc)}"}
            # submit -> result as the driver saw it; less the run's own wall_s: Ray's cost per run
            outcomes[r.key]["task_s"] = round(time.perf_counter() - submitted[r.key], 3)
            on_result(r, outcomes[r.key])
        try:
            on_tick(ray.get(sink.rows.remote()), outcomes)
        except ray.exceptions.RayError:
            pass                    # the sink restarting: the table waits for it
    peaks = ray.get(limiter.peaks.remote()) if limiter is not None else {}
    return outcomes, peaks
