"""`rolebound sweep CONFIG.yaml`: every run of a grid config, on this machine (--executor local,
--parallel N at once) or on a Ray cluster (--executor ray, one task per run), then a sweep index
page and the cross-model card. Re-running the same command skips finished runs and resumes the rest.
docs/scale.md says how records reach the driver and what runs where.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .plan import Plan, finished_before, plan as make_plan

EXECUTORS = ("local", "ray")


@dataclass
class SweepResult:
    out: Path
    outcomes: dict[str, dict[str, Any]]
    index: list[Path] = field(default_factory=list)
    cards: list[Path] = field(default_factory=list)
    peaks: dict[str, int] = field(default_factory=dict)   # ray: endpoint -> most requests at once
    wall_s: float = 0.0

    @property
    def exit_code(self) -> int:
        codes = [o.get("exit_code", 0) for o in self.outcomes.values()]
        return max(codes, default=0)


def sweep(config, *, executor: str = "local", address: str = "auto", parallel: int | None = None,
          out: str | Path | None = None, progress: bool = True, retries: int = 3) -> SweepResult:
    t0 = time.perf_counter()
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor '{executor}'; use local or ray", field="--executor")
    if parallel is not None and parallel < 1:
        raise InputError("must be at least 1", field="--parallel")
    p = make_plan(config, out)
    _validate(p)
    from ..store import claim_folder

    # a user's folder is never written into: new, empty, an earlier sweep's, or its runs only
    claim_folder(p.out, marker="index.json", before=frozenset(r.key for r in p.runs) | {"cards"}, what="sweep")
    outcomes: dict[str, dict[str, Any]] = {}
    todo = []
    for r in p.runs:
        if finished_before(r):
            outcomes[r.key] = {"status": "done", "message": "finished earlier (skipped)", "exit_code": 0,
                               "skipped": True}
        else:
            todo.append(r)
    from .table import SweepTable

    ends: dict[str, float] = {}
    with SweepTable({r.key: r.label for r in p.runs}, enabled=progress) as table:
        def tick(tallies, done):
            for key, o in {**outcomes, **done}.items():
                ends.setdefault(key, time.time())
                tallies[key].status, tallies[key].t_end = o["status"], ends[key]
            table.update(tallies)

        peaks: dict[str, int] = {}
        if not todo:
            pass
        elif executor == "local":
            from .local import execute

            outcomes.update(execute(p, todo, parallel=parallel or 1, on_tick=tick))
        else:
            from .ray_exec import execute, import_ray
            from .reports import Reports

            import_ray()
            with Reports() as reports:      # each run's report while the others still run
                got, peaks = execute(p, todo, address=address, parallel=parallel, on_tick=tick, retries=retries,
                                     on_result=reports.submit)
            outcomes.update(got)
    from .index import write_cards, write_index

    res = SweepResult(out=p.out, outcomes={r.key: outcomes[r.key] for r in p.runs}, peaks=peaks)
    res.cards = write_cards(p, res.outcomes)
    res.index = write_index(p, res.outcomes, executor=executor, cards=res.cards)
    res.wall_s = time.perf_counter() - t0
    return res


def _validate(p: Plan) -> None:
    """What api.run would refuse, before anything is submitted: a grid stops on a bad option
    before its first run starts (as `rolebound run --config` does)."""
    from ..models import parse_spec
    from ..errors import BackendError
    from ..suites import get_suite
    from ..suites.base import validate_options

    for r in p.runs:
        kw = r.kwargs
        s = get_suite(r.suite)
        try:
            validate_options(s, kw.get("options") or {})
        except InputError as exc:
            raise InputError(exc.detail, file=r.source, field=exc.field or "options") from None
        for strat in kw.get("strategies") or []:
            if strat not in s.strategies:
                raise InputError(f"unknown strategy '{strat}' for suite {r.suite}; available: "
                                 + ", ".join(s.strategies), file=r.source, field="strategy")
        try:
            parse_spec(r.model)
        except BackendError as exc:
            raise InputError(str(exc), file=r.source, field="model") from None

