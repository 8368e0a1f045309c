"""The typed records every suite shares: messages, decoding settings, per-call records, run
manifest; the constants they hold (INVALID, the option LETTERS, VERSION); and the Reading an
answer-extraction rule makes of a reply (beneath both the runner, which stores a reading's rule
and span in a record, and scoring, whose rules make readings)."""

from __future__ import annotations

import json
import math
import string
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_serializer

# The constants the core and every suite share (one definition each).
VERSION = "0.1.0"                   # pyproject.toml's; the manifest's package_version, rolebound.__version__
INVALID = "invalid"                 # a reply no rule could read: counted, never guessed
LETTERS = string.ascii_uppercase    # option labels, A for the first option
ABCD = LETTERS[:4]                  # the four-option question of the papers


@dataclass(frozen=True)
class Reading:
    """What a rule read: `value` (option index, "Yes"/"No", or None), the rule's name, the span."""

    value: int | str | None
    rule: str
    span: str = ""

    def as_meta(self) -> dict:
        return {"rule": self.rule, "span": self.span[:160]}


def _not_a_bool(value: Any) -> Any:
    """true/false given for a number is a mistake (pydantic reads True as 1): say so."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    return value


Whole = Annotated[int, BeforeValidator(_not_a_bool)]      # an int field that refuses true/false
Real = Annotated[float, BeforeValidator(_not_a_bool)]


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class Decoding(BaseModel):
    """Per-run decoding settings; recorded in the manifest and part of every cache key."""

    model_config = ConfigDict(extra="forbid")
    temperature: Real = Field(0.0, ge=0.0, le=5.0)
    top_p: Real = Field(1.0, gt=0.0, le=1.0)
    max_tokens: Whole = Field(256, ge=1, le=131072)
    seed: Whole = 0
    stop: list[str] | None = None

    def merged(self, **override: Any) -> "Decoding":
        data = self.model_dump()
        data.update({k: v for k, v in override.items() if v is not None})
        return Decoding.model_validate(data)


CallKind = Literal["chat", "complete", "score"]


def _null_is_minus_inf(value: Any) -> Any:
    """null in a written record's log-probs is -inf (an option the server ranked below its
    top-k): JSON has no infinity."""
    if isinstance(value, list):
        return [-math.inf if x is None else x for x in value]
    return value


def _no_nan(value: list[float]) -> list[float]:
    for x in value:
        if math.isnan(x) or x == math.inf:
            raise ValueError(f"{x!r} is not a log-prob")
    if value and all(x == -math.inf for x in value):
        # what an older version wrote for NaN or +inf: a score names at least one option
        raise ValueError("no option has a log-prob (all null)")
    return value


LogProbs = Annotated[list[float], BeforeValidator(_null_is_minus_inf), AfterValidator(_no_nan)]


class Record(BaseModel):
    """One model call (or one scored probe). Append-only in records.jsonl; the last record per
    call_id wins, so a failed call retried on resume supersedes its error record."""

    # NaN and infinities are written as the constants strict JSON refuses, so record_line()
    # catches them instead of pydantic's silent null
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    call_id: str                   # unique inside a run: item/strategy/stage[/step][#repeat]
    item_id: str
    suite: str
    strategy: str
    stage: str                     # e.g. "ba", "bc", "kv", "s2rd.narrative", "judge"
    role: str = "model"            # "model" (under test), "judge", "generator", "segmenter"
    repeat: int = 0
    kind: CallKind = "chat"
    model: str = ""                # backend:name that answered
    prompt: Any = None             # list of messages or a raw text prompt
    continuations: list[str] | None = None   # score calls: the options scored
    response: str | None = None    # raw text (score calls: the chosen continuation)
    logprobs: LogProbs | None = None         # score calls: one summed log-prob per continuation
                                             # (-inf, written null: below the server's top-k)
    tied: list[str] | None = None  # score calls: the continuations tied for the best log-prob (2+),
                                   # when there is a tie; `response` is then the first of them
    seed: int | None = None        # generation calls: the sampling seed sent (one per repeat)
    parsed: Any = None             # the answer the parser extracted, or "invalid"
    gold: Any = None
    correct: bool | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    cached: bool = False
    error: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)   # item fields metrics group by
    time: str | None = None

    @field_serializer("logprobs", when_used="json")
    def _logprobs_json(self, value: list[float] | None) -> list[float | None] | None:
        return None if value is None else [None if x == -math.inf else x for x in value]


# What the model's reply fills in: a written record whose fields outside these read back is a
# record of the call whose reply could not be kept (store.py reads it as a failed call).
REPLY_FIELDS = frozenset({"response", "logprobs", "tied", "parsed", "correct", "latency_s", "prompt_tokens",
                          "completion_tokens", "finish_reason", "error", "cached"})


class Unkeepable(ValueError):
    """A record that cannot be written as strict JSON and read back."""


class _Constant(ValueError):
    pass


def _refuse(name: str):
    raise _Constant(name)


def record_line(rec: Record) -> str:
    """The record as one line of strict JSON (no NaN or Infinity; -inf log-probs are null) that
    reads back as a record; else Unkeepable naming the field and what is wrong with it."""
    try:
        line = rec.model_dump_json(warnings=False)
        Record.model_validate(json.loads(line, parse_constant=_refuse))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise Unkeepable(f"field '{loc_text(err['loc'])}': {err['msg']} (got {_short(err.get('input'))})") from None
    except ValueError as exc:       # a constant, or pydantic's serialization error
        raise Unkeepable(_unwritable(rec.model_dump()) or str(exc)) from None
    return line


def loc_text(loc: tuple) -> str:
    """('logprobs', 2) -> 'logprobs[2]'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwritable(value: Any, loc: tuple = ()) -> str | None:
    """Where the first value strict JSON cannot hold sits: NaN, an infinity (but a -inf
    log-prob), a lone surrogate."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        if value == -math.inf and loc[:1] == ("logprobs",):
            return None
        return f"field '{loc_text(loc)}' is {value!r}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"field '{loc_text(loc)}' holds a lone surrogate ({value[exc.start]!r})"
        return None
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items()] + [(k, k) for k in value if isinstance(k, str)]
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return None
    for k, v in items:
        if (bad := _unwritable(v, loc + (k,))) is not None:
            return bad
    return None


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    suite: str
    strategies: list[str]
    model: str
    backend: str
    adapter: dict[str, str] | None = None   # --backend-opt adapter=DIR (`rolebound tune`): its path and sha
    judge: str | None = None
    extractor: str | None = None   # --extractor: model-based answer extraction, reported apart
    scoring: str | None = None
    decoding: Decoding
    judge_decoding: Decoding | None = None   # None: judge calls use `decoding`
    protocol: dict[str, Any] = Field(default_factory=dict)   # protocol.py: mode, source, departures,
                                                             # self_judged, seeds
    dataset: str                   # path or "builtin:<name>"
    dataset_hash: str
    dataset_provenance: dict[str, Any] | None = None   # an imported release: its commit, what differs, what is ours
    n_items: int
    dataset_items: int | None = None   # the whole dataset's items (n_items: those run, fewer under --limit)
    limit: int | None = None
    repeats: int = 1
    options: dict[str, Any] = Field(default_factory=dict)
    prompt_templates: dict[str, str] = Field(default_factory=dict)   # name -> sha256[:16]
    package_version: str
    git_revision: str | None = None
    started: str | None = None
    finished: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    model_info: dict[str, Any] = Field(default_factory=dict)
    endpoints: dict[str, str] = Field(default_factory=dict)   # model/judge/extractor -> base URL (no keys)
    skipped_strategies: dict[str, str] = Field(default_factory=dict)   # default strategies left out, and why
    timing: dict[str, float] = Field(default_factory=dict)


def canonical_order(records: list["Record"]) -> list["Record"]:
    """The records sorted by a stable key: every metric (bootstraps included) is then a function
    of the set of records, never of the order the calls happened to finish in."""
    return sorted(records, key=lambda r: (r.call_id, r.repeat, r.role, r.stage))


EXTRACTOR = "extractor"     # the role of --extractor's calls (scoring.model_extract), reported apart


def split_extracted(records: list["Record"]) -> tuple[list["Record"], list["Record"]]:
    """(the run's own records, the --extractor's): the extractor's never enter a suite's own figures."""
    own, ext = [], []
    for r in records:
        (ext if r.role == EXTRACTOR else own).append(r)
    return own, ext
