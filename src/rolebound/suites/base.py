"""What a suite is: a dataset of typed items, the strategies that turn an item into model calls,
and the metrics and report computed from records alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import BaseModel

from ..protocol import DEMO_BACKENDS, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..records import Record, RunManifest
    from ..runner import ItemContext


@dataclass
class Dataset:
    items: list[Any]                 # pydantic items, each with an `id`
    source: str                      # path or "builtin:<name>"
    hash: str
    extra: dict[str, Any] = field(default_factory=dict)   # e.g. characters, corpora


@dataclass
class RunSettings:
    """Everything about a run that is not the model: recorded in the manifest."""

    strategies: list[str]
    scoring: str | None = None       # "generate" | "logprob" (suites that offer both)
    judge: str | None = None         # backend spec of the judge, if the suite uses one
    repeats: int = 1
    limit: int | None = None
    seed: int = 0
    protocol: str = "none"           # "paper" | "demo" | "none": which settings the run uses
    judge_requested: bool = False    # --judge was given (`--judge self` included)
    options: dict[str, Any] = field(default_factory=dict)   # suite-specific (--set key=value)


# The demo backends (the bundled 135M model does not follow the answer formats; `fake:` stands in
# for it in tests) score options by log-likelihood; every other model, `hf:` and `vllm:` included,
# generates its answers as the papers' models did.
LOCAL_ENGINES = DEMO_BACKENDS


def default_scoring_for(backend) -> str:
    """'logprob' or 'generate': the one rule for every generate/logprob choice (--scoring, the
    knowledge-errors judge_scoring) when no paper protocol decides."""
    from ..models.base import LOGPROB

    return "logprob" if backend.supports(LOGPROB) and backend.backend in LOCAL_ENGINES else "generate"


class Suite:
    name: str = ""
    description: str = ""
    strategies: dict[str, str] = {}          # name -> one-line description
    default_strategies: list[str] = []
    uses_judge: bool = False
    offers_scoring: bool = False             # generate vs logprob choice
    protocol: Protocol | None = None         # the paper's decoding, scoring and judge (protocol.py)
    repeats_native: bool = False             # metrics already give mean +- SEM over repeats

    # -- data -------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        raise NotImplementedError

    def select(self, items: Sequence[Any], limit: int | None) -> list[Any]:
        """The items a --limit run keeps; suites override to keep the sample balanced."""
        return list(items)[:limit] if limit else list(items)

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        """(title, DataFrame) tables for `rolebound data stats`."""
        return []

    def prompt_templates(self) -> dict[str, str]:
        return {}

    def default_scoring(self, backend) -> str | None:
        return default_scoring_for(backend) if self.offers_scoring else None

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        """Fail before any call if the backend cannot do what the strategies need."""

    def judge_enabled(self, settings: RunSettings, backend, judge=None) -> bool:
        """Whether a run of a judged suite makes judge calls (then the manifest names the judge).
        `judge` is the judge backend, the model's own when no --judge was given."""
        return True

    # -- work -------------------------------------------------------------------------------
    async def run_item(self, item: Any, ctx: "ItemContext", strategy: str, settings: RunSettings) -> None:
        raise NotImplementedError

    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        """Optional run-level work before the first call (e.g. embeddings the records need)."""

    async def after_items(self, session, dataset: Dataset, settings: RunSettings) -> None:
        """Optional run-level work after all items (e.g. hidden-state analysis)."""

    # -- results ----------------------------------------------------------------------------
    def metrics(self, records: list["Record"], manifest: "RunManifest") -> dict[str, Any]:
        raise NotImplementedError

    def report(self, metrics: dict[str, Any], records: list["Record"], manifest: "RunManifest",
               run_dir: Path) -> list[Path]:
        raise NotImplementedError

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        """A few (label, value) lines for the end-of-run summary and `rolebound compare`."""
        return []


class Item(BaseModel):
    """Base for suite items: every item has a stable id."""

    id: str


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def flag(options: dict[str, Any], key: str, default: bool) -> bool:
    """A yes/no `--set key=value`; anything but true/false/yes/no/on/off/1/0 is an error (a typo
    such as `analysis=flase` must not silently mean False)."""
    v = options.get(key)
    if v is None or isinstance(v, bool):
        return default if v is None else v
    s = str(v).strip().lower()
    if s in _TRUE or s in _FALSE:
        return s in _TRUE
    from ..errors import InputError

    raise InputError(f"{key} must be true or false, not {v!r}", field=key)


def interleave(groups: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin over groups: a1, b1, c1, a2, b2, c2, ... (shorter groups drop out)."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out.extend(g[i] for g in groups if i < len(g))
        i += 1
    return out
