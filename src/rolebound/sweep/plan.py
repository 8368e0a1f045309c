"""A sweep's runs: the grid config expanded, one folder each under the sweep's --out, with the
resources each run needs on a cluster and the endpoint whose cap it shares."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import RunConfig, check_size, load_config
from ..errors import InputError
from ..io import read_regular
from ..loop import API_CONCURRENCY
from ..models import DEFAULT_MODEL, parse_spec
from ..store import MANIFEST, METRICS
from ..suites import get_suite


@dataclass
class PlannedRun:
    key: str                     # the run's folder name under the sweep's --out
    kwargs: dict[str, Any]       # what api.run takes (out: the driver's run folder)
    cpus: float = 1.0            # API and fake runs mostly wait on the network: a quarter core
    gpus: int = 0
    gpu_bundles: bool = False    # vllm over several GPUs: a placement group of 1-GPU bundles
    endpoint: str | None = None  # base_url of an API run (its requests share the endpoint's cap)
    source: str = ""             # the config file it comes from (for errors)

    @property
    def out(self) -> Path:
        return Path(self.kwargs["out"])

    @property
    def label(self) -> str:
        return f"{self.suite} / {self.model} / {self.strategy or 'default'}"

    @property
    def suite(self) -> str:
        return self.kwargs["suite"]

    @property
    def model(self) -> str:
        return self.kwargs.get("model") or DEFAULT_MODEL

    @property
    def strategy(self) -> str | None:
        return ",".join(self.kwargs.get("strategies") or []) or None


@dataclass
class Plan:
    out: Path
    runs: list[PlannedRun]
    limits: dict[str, int] = field(default_factory=dict)   # endpoint -> requests in flight, whole sweep


def slug(*parts: str | None) -> str:
    """The same sub-folder name `--config` gives a grid run."""
    return "__".join((x or "default").replace(":", "-").replace("/", "-") for x in parts)


def plan(configs, out: str | Path | None = None) -> Plan:
    """One or more grid configs (paths or RunConfig) as one sweep."""
    configs = list(configs) if isinstance(configs, (list, tuple)) else [configs]
    if not configs:
        raise InputError("give one or more grid config files", field="CONFIG")
    loaded = [(c, c if isinstance(c, RunConfig) else load_config(c)) for c in configs]
    for src, cfg in loaded:             # each grid, then the whole sweep, before any run is expanded
        cfg.check_grid(None if isinstance(src, RunConfig) else src)
    check_size(sum(cfg.size() for _, cfg in loaded), what=f"the sweep's {len(loaded)} grids have")
    if out is None:
        first, cfg = loaded[0]
        out = cfg.out or Path("sweeps") / (Path(first).stem if not isinstance(first, RunConfig) else "sweep")
    out = Path(out)
    runs, limits, where = [], {}, {}
    for src, cfg in loaded:
        for req in cfg.model_copy(update={"out": None}).expand(file=src if not isinstance(src, RunConfig) else None):
            # the fields set, as JSON: what a Ray task takes, and make_request builds again
            kw = req.model_dump(mode="json", exclude_unset=True, exclude={"out", "progress", "report"})
            kw.setdefault("model", DEFAULT_MODEL)
            key = slug(kw["suite"], kw["model"], ",".join(kw.get("strategies") or []) or None)
            if key in where:
                raise InputError(f"two runs of the sweep share the folder {key} (also in {where[key]})",
                                 file=str(src), field="model")
            where[key] = str(src)
            if kw.get("judge") and not get_suite(kw["suite"]).uses_judge:
                kw.pop("judge")              # a grid's judge is for the suites that have one (as the card)
            if kw.get("data") and Path(kw["data"]).exists():
                kw["data"] = str(Path(kw["data"]).resolve())    # a Ray worker has another cwd
            r = _resources(PlannedRun(key=key, kwargs=dict(kw, out=str(out / key)), source=str(src)))
            runs.append(r)
            if r.endpoint is not None:
                limits[r.endpoint] = min(limits.get(r.endpoint, 1 << 30), endpoint_limit(cfg))
    return Plan(out=out, runs=runs, limits=limits)


def endpoint_limit(cfg: RunConfig) -> int:
    """Requests in flight to the grid's endpoint for the whole sweep: the smaller of the
    `concurrency` values the user set (backend and run), else the API default."""
    given = [c for c in (cfg.backend.concurrency, cfg.concurrency) if c]
    return min(given) if given else API_CONCURRENCY


def _resources(run: PlannedRun) -> PlannedRun:
    import os

    backend, _ = parse_spec(run.model)
    bo = run.kwargs.get("backend_options") or {}
    parallel = int(bo.get("tensor_parallel_size") or 1) * int(bo.get("pipeline_parallel_size") or 1)
    if backend == "vllm":
        run.gpus, run.gpu_bundles, run.cpus = parallel, parallel > 1, 1.0
    elif backend == "hf" and str(bo.get("device") or "").startswith("cuda"):
        run.gpus = parallel          # one process holds them all (device_map): one node
    elif backend in ("bundled", "hf"):
        run.cpus = float(bo.get("threads") or 1)
    else:
        run.cpus = 0.25
    if backend == "openai":
        run.endpoint = bo.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "default"
    return run


def finished_before(run: PlannedRun) -> bool:
    """The run folder holds this run, finished with no failed call: a re-submitted sweep skips
    it. Anything else (partial, failed calls, another limit) goes to api.run, which resumes it
    or says why it cannot."""
    try:
        m = json.loads(read_regular(run.out / MANIFEST).decode("utf-8"))
    except (OSError, ValueError, InputError):     # api.run says what is wrong with it
        return False
    kw = run.kwargs
    strategies = kw.get("strategies")
    same = (m.get("suite") == kw["suite"] and m.get("limit") == kw.get("limit")
            and m.get("repeats") == kw.get("repeats", 1)
            and all((m.get("options") or {}).get(k) == v for k, v in (kw.get("options") or {}).items())  # + defaults
            and (not strategies or m.get("strategies") == strategies))
    c = m.get("counts") or {}
    return bool(same and m.get("finished") and not c.get("failed_calls") and not c.get("failed_items")
                and (run.out / METRICS).exists())
