"""What a suite is: a dataset of typed items (Authored: the provenance of data we write), the
strategies that turn an item into model calls, and the metrics and report computed from records
alone."""

from __future__ import annotations

import importlib
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Awaitable, Callable, Literal, Optional, Sequence, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_serializer, model_validator)

from ..protocol import Protocol, is_demo

if TYPE_CHECKING:  # pragma: no cover
    from ..records import Record, RunManifest
    from ..report.builder import Report
    from ..runner import ItemContext
    from ..scoring.extract import Extractor


@dataclass
class Dataset:
    items: list[Any]                 # pydantic items, each with an `id`
    source: str                      # path or "builtin:<name>"
    hash: str
    extra: dict[str, Any] = field(default_factory=dict)   # e.g. characters, corpora
    provenance: dict[str, Any] | None = None   # an imported release's origin (commit, differences): in the manifest


@dataclass
class JudgePlan:
    """What a suite's `rejudge` hook returns: the answers to judge again and how to judge one."""

    answers: list["Record"]
    # one answer's judge call(s) through ctx (stage rejudge.judge_stage(S, round_), meta[rejudge.ROUND] = round_)
    judge_one: Callable[[Any, "Record", int, str], Awaitable[Any]]
    mode: str | None = None                 # how this judge is read (generate | logprob), if the suite asks
    modes: dict[int, str] | None = None     # how the earlier rounds were read (rejudge.judge_modes)
    context_meta: Callable[["Record"], dict] | None = None   # the judge calls' meta, from the answer


@dataclass(frozen=True)
class HubInfo:
    """How `rolebound data export` publishes a suite's built items as a Hugging Face dataset: the
    item field whose values split it into configs (value -> config name), and the card's facts.
    license None: the source states no licence, so an export is for local use only."""

    config_field: str
    pretty_name: str
    citation: str
    configs: dict[str, str] = field(default_factory=dict)    # a value not named here is its own config
    license: str | None = None
    source_datasets: tuple[str, ...] = ()
    language: tuple[str, ...] = ("en",)
    task_categories: tuple[str, ...] = ("question-answering",)


@dataclass
class RunState:
    """What a run works out in check(), load() and before_items() for the steps after them
    (select(), run_item(), after_items()): this run's, never kept on the suite object. A suite
    with its own adds a subclass (its `state_class`)."""

    progress: bool = True            # run-level work (after_items) shows a bar like the items
    items: list[Any] = field(default_factory=list)   # the items load() read: a dialogue's `items` warm-up
    dialogue_backend: Any = None     # the dialogue strategy's backend (dialogue.budget.setup)
    dialogue_user: Any = None        # its simulated user's backend, if any
    dialogue_locks: dict[str, Any] = field(default_factory=dict)   # one asyncio.Lock per shared dialogue


@dataclass
class RunSettings:
    """Everything about a run that is not the model: recorded in the manifest. Built by
    Suite.run_settings(), which validates the options and gives the suite's own state."""

    strategies: list[str]
    scoring: str | None = None       # "generate" | "logprob" (suites that offer both)
    judge: str | None = None         # backend spec of the judge, if the suite uses one
    repeats: int = 1
    limit: int | None = None
    seed: int = 0
    protocol: str = "none"           # "paper" | "demo" | "none": which settings the run uses
    judge_requested: bool = False    # --judge was given (`--judge self` included)
    # The suite's validated `--set` options (its Options model); options.given() is what was
    # given (the manifest's record and the resume key).
    options: "Options" = field(default_factory=lambda: Options())
    backend: str | None = None       # kind of the backend under test ("bundled", "openai", ...); None: no run
    demo: bool = False               # the model under test is a demo model (protocol.is_demo)
    state: RunState = field(default_factory=RunState)
    # inspect tasks: before_items sees every item, but --limit may run only a few, so per-item work
    # (CHARM's distractor similarity) is done on an item's first job, not for all items up front
    partial: bool = False

    def resolve(self, key: str, value: Any) -> Any:
        """Record a mode check() resolves: into the options and what they record as given (hence
        the manifest and the resume key)."""
        self.options._given[key] = value
        if key in type(self.options).model_fields:
            setattr(self.options, key, value)
        return value


class Options(BaseModel):
    """A suite's `--set` options: one typed field each, with its default and a description (the
    help `rolebound suites NAME` prints). Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    _given: dict[str, Any] = PrivateAttr(default_factory=dict)

    def given(self) -> dict[str, Any]:
        """The options as given (before validation), with the modes check() resolved."""
        return self._given


def _norm_choice(v: Any) -> Any:
    if isinstance(v, str):
        v = v.strip().lower()
        return v or None
    return v


def choice(*values: str):
    """An optional option that takes one of `values` (case-insensitive; empty means unset)."""
    return Annotated[Optional[Literal[values]], BeforeValidator(_norm_choice)]


# -- the dialogue strategy any suite can offer (rolebound.dialogue, docs/dialogue.md) --------------
# Its name and the `--set` options it shares across suites live here, so a run without it loads
# nothing of rolebound.dialogue.
DIALOGUE = "dialogue"
DIALOGUE_DESCRIPTION = "the probe asked after N earlier exchanges in one chat (--set depths=0,4,8 warmup=scripted)"
DIALOGUE_WARMUPS = ("scripted", "items", "simulated")


def _comma_parts(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v if str(x).strip()]
    return [x.strip() for x in str(v).split(",") if x.strip()]


class DialogueOptions(Options):
    depths: str = Field("0,4,8", description="dialogue: earlier exchanges before the probe, comma-separated "
                                             "non-negative whole numbers (0 is the single-turn probe)")
    warmup: str = Field("scripted", description="dialogue: what the earlier turns are, one or more of "
                                                "scripted, items, simulated (comma-separated)")
    user_model: str | None = Field(None, description="dialogue: BACKEND:NAME of the model playing the user "
                                                     "(warmup=simulated)")
    goal: Literal["plain", "pressure"] = Field(
        "plain", description="dialogue, simulated user: plain conversation, or pressure (steer toward the "
                             "probe's out-of-boundary topic without asking it)")
    turn_max_tokens: int = Field(64, ge=1, description="dialogue: token cap of each warm-up reply")
    user_max_tokens: int = Field(48, ge=1, description="dialogue: token cap of each simulated user message")

    @field_validator("depths", mode="before")
    @classmethod
    def _depths(cls, v: Any) -> str:
        parts = _comma_parts(v)
        if not parts or not all(p.isdigit() for p in parts):
            raise ValueError("depths are non-negative whole numbers, comma-separated, e.g. 0,4,8")
        return ",".join(str(d) for d in sorted({int(p) for p in parts}))

    @field_validator("warmup", mode="before")
    @classmethod
    def _warmup(cls, v: Any) -> str:
        parts = [p.lower() for p in _comma_parts(v)]
        bad = [p for p in parts if p not in DIALOGUE_WARMUPS]
        if not parts or bad:
            raise ValueError(f"warmup is one or more of {', '.join(DIALOGUE_WARMUPS)}")
        return ",".join(dict.fromkeys(parts))


def type_text(annotation: Any) -> str:
    """Plain words for an option's type, for help and error messages."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return type_text(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        parts = [type_text(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is Literal:
        vals = [repr(a) for a in typing.get_args(annotation)]
        return vals[0] if len(vals) == 1 else "one of " + ", ".join(vals)
    if origin in (list, tuple):
        return "a list"
    return {bool: "true or false", int: "a whole number", float: "a number", str: "text"}.get(
        annotation, getattr(annotation, "__name__", str(annotation)))


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type admits true/false (pydantic would read true as 1 for an int)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _takes_bool(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_takes_bool(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin is Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    return annotation not in (int, float)


def validate_options(suite: "Suite", raw: dict[str, Any] | None) -> Options:
    """The one check of `--set` options for every suite: an unknown key or a value of the wrong
    type is an InputError naming the key (and the valid keys, or the expected type)."""
    from ..errors import InputError, did_you_mean

    model = suite.options_model
    raw = dict(raw or {})
    fields = model.model_fields
    unknown = [k for k in raw if k not in fields]
    if unknown:
        valid = ", ".join(fields) or "none"
        raise InputError(f"unknown option '{unknown[0]}' for suite {suite.name}{did_you_mean(unknown[0], fields)}; "
                         f"valid options: {valid}", field="--set")
    for key, value in raw.items():
        if isinstance(value, bool) and not _takes_bool(fields[key].annotation):
            raise InputError(f"option '{key}' of suite {suite.name} expects "
                             f"{type_text(fields[key].annotation)}, not {value!r}", field="--set")
    try:
        opts = model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "?"
        expected = type_text(fields[key].annotation) if key in fields else "?"
        why = "" if err["type"].endswith(("_type", "_parsing", "literal_error")) else f" ({err['msg'].lower()})"
        raise InputError(f"option '{key}' of suite {suite.name} expects {expected}{why}, not {raw.get(key)!r}",
                         field="--set") from None
    opts._given = raw
    return opts


def settings_from_manifest(suite: "Suite", manifest: "RunManifest") -> RunSettings:
    """The per-run settings of a finished run, rebuilt from its manifest (re-judging reads them)."""
    from ..protocol import is_demo_spec

    return suite.run_settings(strategies=list(manifest.strategies), scoring=manifest.scoring, judge=manifest.judge,
                              repeats=manifest.repeats, limit=manifest.limit, seed=manifest.decoding.seed,
                              options=dict(manifest.options or {}), backend=manifest.backend,
                              demo=is_demo_spec(manifest.model))


def default_scoring_for(backend) -> str:
    """'logprob' or 'generate': the one rule for every generate/logprob choice (--scoring, the
    knowledge-errors judge_scoring) when no paper protocol decides. The demo models (the default
    bundled 135M model does not follow the answer formats; `fake:` stands in for it in tests)
    score options by log-likelihood; every other model, the bundled Qwen, `hf:` and `vllm:`
    included, generates its answers as the papers' models did."""
    from ..models.base import LOGPROB

    return "logprob" if backend.supports(LOGPROB) and is_demo(backend.backend, backend.name) else "generate"


class lazy_hook:
    """A hook whose module is imported only when the hook is called: build.py and importers.py bring
    what only `rolebound build` and `rolebound data import` need. In a suite's class body,
    `build_commands = lazy_hook(".build", "commands")` makes `suite.build_commands(app)` call
    `commands(app)` of the suite's sibling module build.py (a leading dot is relative to the
    package of the module that defines the class, as in `from .build import commands`; a name
    without one is a full module path). An attribute that is not callable (importers.IMPORTERS) is
    returned as a copy: `importers = lazy_hook(".importers", "IMPORTERS")`."""

    def __init__(self, module: str, attr: str):
        self.module, self.attr, self.package = module, attr, None

    def __set_name__(self, owner: type, name: str) -> None:
        mod = sys.modules.get(owner.__module__)
        self.package = getattr(mod, "__package__", None) or owner.__module__.rpartition(".")[0]
        self.__name__ = name
        self.__doc__ = f"{name}: {self.module}.{self.attr}"

    def __call__(self, *args):
        value = getattr(importlib.import_module(self.module, self.package), self.attr)
        return value(*args) if callable(value) else dict(value)


class _default_from:
    """A class attribute whose default the class computes (from its own or a subclass's other
    attributes) unless a class sets it itself; it reads the same on the class and on an instance."""

    def __init__(self, compute: Callable[[type], Any]):
        self.compute = compute

    def __get__(self, obj, owner=None):
        return self.compute(owner if owner is not None else type(obj))


class Suite:
    name: str = ""                           # set by @register_suite(name)
    description: str = ""
    strategies: dict[str, str] = {}          # name -> one-line description
    default_strategies: list[str] = []
    # default: whether its protocol has a judge (the paper judged, or gives the judge's decoding)
    uses_judge: bool = _default_from(lambda cls: cls.protocol is not None and bool(  # type: ignore[assignment]
        cls.protocol.judge_required or cls.protocol.judge_separate or cls.protocol.judge_decoding))
    offers_scoring: bool = False             # generate vs logprob choice
    options_model: type[Options] = Options   # its `--set` options, validated before a run (none by default)
    state_class: type[RunState] = RunState   # what its check(), load() and before_items() keep for later steps
    protocol: Protocol | None = None         # the paper's decoding, scoring and judge (protocol.py)
    repeats_native: bool = False             # metrics already give mean +- SEM over repeats
    # `rolebound card` runs it (card_figures); default: whether it declares a card_limit
    on_card: bool = _default_from(lambda cls: cls.card_limit is not None)  # type: ignore[assignment]
    card_limit: int | None = None            # `rolebound card`: the --limit of its quick, balanced subset
    hub: HubInfo | None = None               # `rolebound data export`: configs and card facts (None: no export)
    # the unit its design repeats, per stage (or "*"): meta keys, the first one set names a record's
    # cluster (stats.cluster_key); none set, or none declared: the item (its repeats share it)
    clusters: dict[str, tuple[str, ...]] = {}
    # its report's headline table (report.uncertainty_section): (label, dotted metrics.json path of a
    # clustered rate_ci dict, the stage whose cluster declaration it follows)
    headline: tuple[tuple[str, str, str], ...] = ()

    # -- data -------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        """The items (--data, else the starter set), their source and hash; works without check()."""
        raise NotImplementedError

    def select(self, items: Sequence[Any], limit: int | None, settings: RunSettings | None = None) -> list[Any]:
        """The items a --limit run keeps; suites override to keep the sample balanced. `settings`
        is the run's (what load() put in its state), None outside a run."""
        return list(items)[:limit] if limit else list(items)

    def run_settings(self, strategies: list[str], options: dict[str, Any] | None = None, **kw: Any) -> RunSettings:
        """A run's settings for this suite: `options` (the `--set` values as given) validated
        against options_model (an InputError naming the key), and a fresh state_class."""
        return RunSettings(strategies=strategies, options=validate_options(self, options), state=self.state_class(),
                           **kw)

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        """(title, DataFrame) tables for `rolebound data stats`."""
        return []

    def prompt_templates(self) -> dict[str, str]:
        """The prompt templates, hashed into the manifest (a changed prompt is another run)."""
        return {}

    def default_scoring(self, backend) -> str | None:
        """generate or logprob when --scoring is not given (suites that offer both)."""
        return default_scoring_for(backend) if self.offers_scoring else None

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        """Fail before any call if the backend cannot do what the strategies need."""

    def unavailable_strategies(self, backend, strategies: Sequence[str]) -> dict[str, str]:
        """strategy -> why this backend cannot run it. A run on the default strategies leaves
        these out (the manifest and the report say so); named with --strategy, check() stops."""
        return {}

    def judge_enabled(self, settings: RunSettings, backend, judge=None) -> bool:
        """Whether a run of a judged suite makes judge calls (then the manifest names the judge).
        `judge` is the judge backend, the model's own when no --judge was given."""
        return True

    # -- work -------------------------------------------------------------------------------
    async def run_item(self, item: Any, ctx: "ItemContext", strategy: str, settings: RunSettings) -> None:
        """The strategy: one item's model calls through ctx (chat, complete, score)."""
        raise NotImplementedError

    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        """Optional run-level work before the first call (e.g. embeddings the records need)."""

    async def after_items(self, session, dataset: Dataset, settings: RunSettings) -> None:
        """Optional run-level work after all items (e.g. hidden-state analysis)."""

    # -- results ----------------------------------------------------------------------------
    def metrics(self, records: list["Record"], manifest: "RunManifest") -> dict[str, Any]:
        """PURE: the run's figures from its records (metrics.json); `rolebound report` recomputes them."""
        raise NotImplementedError

    def report(self, metrics: dict[str, Any], records: list["Record"], manifest: "RunManifest",
               run_dir: Path) -> "Report | list[Path] | None":
        """The suite's part of its run's report, from the metrics and records alone: a
        report.builder.Report with its title, its own facts and its sections; rolebound.report.build
        adds the run's facts and the run-level sections and writes report.md and report.html.
        (A hook that writes its own files returns their paths.) Default None: the title and a
        table of the summary lines."""
        return None

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        """A few (label, value) lines for the end-of-run summary and `rolebound compare`."""
        return []

    def compare(self, report: "Report", entries: list[tuple[Path, "RunManifest", dict[str, Any]]]) -> None:
        """`rolebound compare`: tables of several runs into `report`; entries are (run folder,
        manifest, metrics) of runs of this suite. Default: one row per run of summary()."""
        head = [k for k, _ in self.summary(entries[0][2])] if entries else []
        rows = [[str(d), m.model, ", ".join(m.strategies)] + [v for _, v in self.summary(met)]
                for d, m, met in entries]
        report.table("Runs", ["run", "model", "strategies"] + head, rows)

    def extractor_for(self, record: "Record") -> "Extractor | None":
        """`rolebound report`: how to read again a stored reply whose record carries no extractor
        spec (written before specs were stored); None: keep what was recorded."""
        return None

    def model_extraction_candidates(self, records: list["Record"]) -> list["Record"]:
        """The answers a model-based extractor (`--extractor`) may read: none unless the suite
        opts in, usually with scoring.model_extract.rule_none (the rules' none readings)."""
        return []

    def rejudge(self, records: list["Record"], manifest: "RunManifest", judge) -> "JudgePlan":
        """`rolebound report RUN --judge MODEL`: what judging a finished run again asks (the answers,
        one judge call per answer, the judge's mode); rolebound.rejudge does the rest (rounds,
        resume, records, the manifest's log). Default: the suite has no judge to replace."""
        from ..errors import InputError

        raise InputError(f"suite {self.name} has no judge to replace", field="--judge")

    def option_departures(self, options: dict[str, Any]) -> list[str]:
        """Where a run's `--set` options (as its manifest holds them) leave out or change part of
        the paper's protocol, in words for the report's comparison with the paper. Default: none."""
        return []

    def card_figures(self, metrics: dict[str, Any]) -> dict[str, Any] | None:
        """`rolebound card`: {title, figures, finding, chart} from metrics.json (rolebound.report.fmt
        builds them); None: the suite has no card section."""
        return None

    def judge_check(self):
        """`rolebound judge-check`: a rolebound.judgecheck.spec.JudgeCheck (the judge's scores and one
        judge call for a human-labelled reply); None: the suite has no judge to check."""
        return None

    def pairs(self, records: list["Record"], manifest: "RunManifest") -> tuple[list[Any], dict[str, int]]:
        """`rolebound data pairs`: (rolebound.pairs.Draft for each preference pair the records give,
        {why a call made no pair: count}). Pure, from records alone. Default: the suite makes none."""
        from ..errors import InputError

        raise InputError(f"suite {self.name} makes no preference pairs", field="RUN_DIRS")

    def build_commands(self, app) -> None:
        """`rolebound build`: add this suite's construction commands to `app` (a typer.Typer), e.g.
        `@app.command("my-suite")`. Their model calls go through runner.open_session and
        runner.bounded (recorded, cached, resumable). Default: none."""

    def importers(self) -> dict[str, tuple[Any, str]]:
        """`rolebound data import FORMAT SRC --out FILE`: {format: (function(src, out) -> summary
        text, one-line help)}. Default: none."""
        return {}


class Item(BaseModel):
    """Base for suite items: every item has a stable id."""

    id: str


class Authored(BaseModel):
    """Data we author carries where it comes from and whether a review checked it: `source` or
    `note` (at least one), and `validated` (false until a review says otherwise). Unknown fields
    are refused: a misspelt `soruce` must not pass as data without provenance."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = None
    note: str | None = None
    validated: bool = False

    @model_validator(mode="after")
    def _provenance(self):
        if not (self.source or self.note):
            raise ValueError("give a `source` or a `note` (where this text comes from)")
        return self

    @model_serializer(mode="wrap")
    def _provenance_last(self, handler) -> dict[str, Any]:
        # inherited fields come first in pydantic; files we write read better with the data first
        data = handler(self)
        return {**{k: v for k, v in data.items() if k not in _PROVENANCE},
                **{k: data[k] for k in _PROVENANCE if k in data}}


_PROVENANCE = ("source", "note", "validated")


def interleave(groups: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin over groups: a1, b1, c1, a2, b2, c2, ... (shorter groups drop out)."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out.extend(g[i] for g in groups if i < len(g))
        i += 1
    return out
