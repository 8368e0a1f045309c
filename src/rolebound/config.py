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
from pathlib import Path
from typing import Any

from pydantic import Field

from .io import read_yaml, validate_yaml
from .request import BackendOptions, ModelSpec, RunRequest, RunSettingsFields, make_request

__all__ = ["BackendOptions", "RunConfig", "load_config"]


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

    def expand(self, file: str | Path | None = None) -> list[RunRequest]:
        """One RunRequest per run of the grid (checked as the CLI and api.run check theirs)."""
        suites = self.suite if isinstance(self.suite, list) else [self.suite]
        models = self.model if isinstance(self.model, list) else [self.model]
        strats = self.strategy if isinstance(self.strategy, list) else [self.strategy]
        grid = list(itertools.product(suites, models, strats))
        runs = []
        for suite, model, strat in grid:
            out = None
            if self.out:
                if len(grid) == 1:
                    out = self.out
                else:
                    slug = "__".join(x.replace(":", "-").replace("/", "-") for x in (suite, model, strat or "default"))
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


def _given(opts: BackendOptions | None) -> dict[str, Any] | None:
    return opts.model_dump(exclude_none=True) or None if opts is not None else None


def load_config(path: str | Path) -> RunConfig:
    data = read_yaml(path)
    return validate_yaml(RunConfig, data, file=path)
