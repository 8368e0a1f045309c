"""Run configs in YAML: one run, or a grid of models x suites x strategies.

    suite: charm                   # or a list
    model: [bundled, openai:gpt-4o-mini]
    strategy: [vanilla, sequential]  # each entry one run; "a,b" runs both in one directory
    limit: 100
    decoding: {temperature: 0.0, max_tokens: 256}   # what is set here overrides the paper protocol
    judge_decoding: {temperature: 0.1}
    extractor: openai:gpt-4o-mini  # optional: a model reads the answers the rules read as none
    protocol: paper                # or demo; default: paper, demo settings on the bundled model
    backend: {base_url: http://127.0.0.1:8000/v1, concurrency: 32}
    judge: openai:deepseek-chat
    judge_backend: {base_url: https://api.deepseek.com/v1, api_key_env: DEEPSEEK_API_KEY}   # the judge's own
    extractor_backend: {base_url: http://127.0.0.1:8001/v1}    # the extractor's own endpoint
    options: {data_seed: 0}         # the suite's --set options (`rolebound suites NAME`)
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from pydantic import Field

from .errors import InputError
from .io import read_yaml, validate_yaml
from .request import BackendOptions, ModelSpec, RunRequest, RunSettingsFields, make_request

__all__ = ["BackendOptions", "MAX_GRID_RUNS", "RunConfig", "load_config"]

# the most runs one `run --config` or one sweep takes: a slip in a grid (a list pasted twice)
# must be refused at once, not expanded for minutes
MAX_GRID_RUNS = 1000


class RunConfig(RunSettingsFields):
    suite: str | list[str]
    model: ModelSpec | list[ModelSpec] = "bundled"
    strategy: str | list[str] | None = None
    out: str | None = None          # a folder; with a grid, each run gets a sub-folder
    cache: bool = True
    backend: BackendOptions = Field(default_factory=BackendOptions)
    judge_backend: BackendOptions | None = None       # the judge's own options (else the run's, less the endpoint)
    extractor_backend: BackendOptions | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    def axes(self) -> dict[str, list]:
        return {name: v if isinstance(v, list) else [v]
                for name, v in (("suite", self.suite), ("model", self.model), ("strategy", self.strategy))}

    def size(self) -> int:
        return math.prod(len(v) for v in self.axes().values())

    def check_grid(self, file: str | Path | None = None) -> None:
        """A grid with no runs, too many, or two entries that share a run folder: one line each."""
        axes, file = self.axes(), str(file) if file else None
        for name, values in axes.items():
            if not values:
                raise InputError("is an empty list: the grid has no runs", file=file, field=name)
        for name, values in axes.items():
            seen: dict[str, Any] = {}
            for v in values:
                key = slug_part(v)
                if key in seen:
                    what = (f"lists '{v}' twice" if seen[key] == v
                            else f"'{seen[key]}' and '{v}' share the folder name {key}")
                    raise InputError(f"{what}; each run of a grid needs its own folder", file=file, field=name)
                seen[key] = v
        check_size(self.size(), axes, file)

    def expand(self, file: str | Path | None = None) -> list[RunRequest]:
        """One RunRequest per run of the grid (checked as the CLI and api.run check theirs)."""
        self.check_grid(file)
        suites, models, strats = self.axes().values()
        grid = list(itertools.product(suites, models, strats))
        runs = []
        for suite, model, strat in grid:
            out = None
            if self.out:
                if len(grid) == 1:
                    out = self.out
                else:
                    slug = "__".join(slug_part(x) for x in (suite, model, strat))
                    out = str(Path(self.out) / slug)
            runs.append(make_request(dict(
                suite=suite, model=model, strategies=strat, data=self.data, limit=self.limit, out=out,
                scoring=self.scoring, judge=self.judge, repeats=self.repeats, decoding=self.decoding,
                judge_decoding=self.judge_decoding, protocol=self.protocol,
                allow_greedy_repeats=self.allow_greedy_repeats, concurrency=self.concurrency,
                use_cache=self.cache, backend_options=self.backend, options=self.options,
                extractor=self.extractor, judge_options=self.judge_backend or {},
                extractor_options=self.extractor_backend or {}), file=file))
        return runs


def slug_part(value: str | None) -> str:
    """One part of a grid run's folder name (suite, model or strategy)."""
    return (value or "default").replace(":", "-").replace("/", "-")


def check_size(n: int, axes: dict[str, list] | None = None, file: str | None = None,
               what: str = "the grid has") -> None:
    if n > MAX_GRID_RUNS:
        how = f" ({' x '.join(f'{k} {len(v):,}' for k, v in axes.items())})" if axes else ""
        raise InputError(f"{what} {n:,} runs{how}; one command runs at most {MAX_GRID_RUNS:,}: "
                         "split it into smaller grids", file=file)


def load_config(path: str | Path) -> RunConfig:
    data = read_yaml(path)
    return validate_yaml(RunConfig, data, file=path)
