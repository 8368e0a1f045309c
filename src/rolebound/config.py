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
    options: {data_seed: 0}         # the suite's --set options (`rolebound suites NAME`)
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .io import read_yaml, validate_yaml
from .records import Decoding


class BackendOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = Field(None, ge=1, le=4096)
    timeout: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0, le=20)
    endpoint: str | None = None
    tokenizer: str | None = None
    dtype: str | None = None
    device: str | None = None
    threads: int | None = Field(None, ge=1)
    max_batch: int | None = Field(None, ge=1)
    batch_tokens: int | None = Field(None, ge=64)
    tensor_parallel_size: int | None = Field(None, ge=1)
    data_parallel_size: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=16)
    enable_prefix_caching: bool | None = None
    transport: str | None = None           # openai backend: sdk (default) or aiohttp
    prefix_min: int | None = Field(None, ge=0)   # local engines: shortest shared prefix reused (0: off)
    engine: str | None = None              # bundled models: torch (default) or llamacpp
    n_ctx: int | None = Field(None, ge=256)      # llamacpp: KV cells shared by the rows of a batch
    prefix_max: int | None = Field(None, ge=0)   # llamacpp: longest resident prefix kept across calls
    think_tag: str | None = None           # reasoning opener for Capability Injection (default: from the chat template)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str | list[str]
    model: str | list[str] = "bundled"
    strategy: str | list[str] | None = None
    data: str | None = None
    limit: int | None = Field(None, ge=1)
    out: str | None = None          # a folder; with a grid, each run gets a sub-folder
    scoring: str | None = None
    judge: str | None = None
    extractor: str | None = None    # model-based answer extraction, reported apart
    repeats: int = Field(1, ge=1, le=100)
    allow_greedy_repeats: bool = False
    protocol: str | None = None
    concurrency: int | None = Field(None, ge=1, le=4096)
    cache: bool = True
    decoding: Decoding = Field(default_factory=Decoding)      # only the fields set count (protocol.py)
    judge_decoding: Decoding = Field(default_factory=Decoding)
    backend: BackendOptions = Field(default_factory=BackendOptions)
    options: dict[str, Any] = Field(default_factory=dict)

    def expand(self) -> list[dict[str, Any]]:
        """One dict of api.run keyword arguments per run of the grid."""
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
            runs.append(dict(suite=suite, model=model, strategies=strat, data=self.data, limit=self.limit,
                             out=out, scoring=self.scoring, judge=self.judge, repeats=self.repeats,
                             decoding=self.decoding, judge_decoding=self.judge_decoding,
                             protocol=self.protocol, allow_greedy_repeats=self.allow_greedy_repeats,
                             concurrency=self.concurrency, use_cache=self.cache,
                             backend_options=self.backend.model_dump(exclude_none=True),
                             options=self.options, extractor=self.extractor))
        return runs


def load_config(path: str | Path) -> RunConfig:
    data = read_yaml(path)
    return validate_yaml(RunConfig, data, file=path)
