"""One typed run request: what `rolebound run` flags, a YAML run config and `api.run` all build,
so a value is refused the same way (exit 2, one line) whichever way it came in.

    from rolebound.request import RunRequest
    rolebound.run(RunRequest(suite="charm", model="fake:random", limit=10))

Adding a setting: a field here (with its check), then the flag in cli.py that fills it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .errors import BackendError, InputError
from .io import expected
from .models import DEFAULT_MODEL
from .records import Decoding, Real, Whole
from .threads import MAX_THREADS


def check_spec(value: str | None) -> str | None:
    """BACKEND:NAME, well formed and naming a known backend (`bundled` alone is the default
    bundled model; a plugin backend with a default name may stand alone too)."""
    from .models import parse_spec

    if value is None:
        return None
    spec = value.strip()
    if not spec:
        raise ValueError("is empty; give BACKEND:NAME (see `rolebound models`)")
    backend, colon, name = spec.partition(":")
    if colon and not name.strip():
        raise ValueError(f"'{spec}' has no model name after the colon; give {backend}:NAME")
    try:
        parse_spec(spec)
    except BackendError as exc:
        raise ValueError(str(exc)) from None
    return spec


def check_judge(value: str | None) -> str | None:
    return "self" if value is not None and value.strip() == "self" else check_spec(value)


def split_strategies(value: Any) -> Any:
    """'a,b' -> ['a', 'b']; a name left empty (',', 'a,') is refused, not skipped."""
    if isinstance(value, str):
        parts = [x.strip() for x in value.split(",")]
        if not all(parts):
            raise ValueError(f"'{value}' has an empty strategy name; give NAME[,NAME...]")
        return parts
    if isinstance(value, (list, tuple)):
        if not value or not all(isinstance(x, str) and x.strip() for x in value):
            raise ValueError("names no strategy, or an empty one; give NAME[,NAME...] or leave it out")
        return [x.strip() for x in value]
    return value


def check_url(value: str | None) -> str | None:
    """http(s)://HOST[:PORT]/PATH, without spaces or control characters (a CR/LF would split the
    request head) and with a port that exists."""
    from .models.openai_api import url_problem

    if value is None:
        return None
    url = value.strip()
    if (bad := url_problem(url)) is not None:
        raise ValueError(f"{url!r} {bad}")
    return url


def check_threads(value: int | None) -> int | None:
    if value is not None and not 1 <= value <= MAX_THREADS:
        raise ValueError(f"must be a whole number from 1 to {MAX_THREADS}")
    return value


def check_data(value: str | None) -> str | None:
    """A data path that exists must be a file or a folder: read, /dev/zero never ends and a FIFO
    waits for a writer (a missing path is the suite's to report)."""
    if value is not None and os.path.exists(value) and not (os.path.isfile(value) or os.path.isdir(value)):
        raise ValueError(f"'{value}' is not a regular file (a device, FIFO or socket); give a file")
    return value


def given_decoding(value: Any) -> Any:
    """A dict counts only the keys given a value (the suite's protocol fills the rest)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


ModelSpec = Annotated[str, AfterValidator(check_spec)]
OptionalSpec = Annotated[str | None, AfterValidator(check_spec)]
JudgeSpec = Annotated[str | None, AfterValidator(check_judge)]          # BACKEND:NAME, or "self"
Strategies = Annotated[list[str] | None, BeforeValidator(split_strategies)]
GivenDecoding = Annotated[Decoding, BeforeValidator(given_decoding)]


class BackendOptions(BaseModel):
    """Backend options with a check; any other key goes to the backend, which refuses the ones
    it does not know (listing those it does)."""

    model_config = ConfigDict(extra="allow")
    base_url: Annotated[str | None, AfterValidator(check_url)] = None
    api_key_env: str | None = None
    concurrency: Whole | None = Field(None, ge=1, le=4096)
    timeout: Real | None = Field(None, gt=0)
    max_retries: Whole | None = Field(None, ge=0, le=20)
    backoff_base: Real | None = Field(None, ge=0)
    backoff_max: Real | None = Field(None, ge=0)
    connect_retries: Whole | None = Field(None, ge=0)
    max_consecutive_failures: Whole | None = Field(None, ge=0)
    endpoint: str | None = None
    tokenizer: str | None = None
    dtype: str | None = None
    device: str | None = None
    threads: Annotated[Whole | None, AfterValidator(check_threads)] = None
    max_batch: Whole | None = Field(None, ge=1)
    batch_tokens: Whole | None = Field(None, ge=64)
    tensor_parallel_size: Whole | None = Field(None, ge=1)
    data_parallel_size: Whole | None = Field(None, ge=1)
    pipeline_parallel_size: Whole | None = Field(None, ge=1)     # vllm: layers split over GPUs/nodes
    distributed_executor_backend: str | None = None            # vllm: ray (multi-node) or mp
    gpu_memory_utilization: Real | None = Field(None, gt=0, le=1)
    max_model_len: Whole | None = Field(None, ge=16)
    enable_prefix_caching: bool | None = None
    transport: str | None = None           # openai backend: sdk (default) or aiohttp
    prefix_min: Whole | None = Field(None, ge=0)   # local engines: shortest shared prefix reused (0: off)
    engine: str | None = None              # bundled models: torch (default) or llamacpp
    n_ctx: Whole | None = Field(None, ge=256)      # llamacpp: KV cells shared by the rows of a batch
    prefix_max: Whole | None = Field(None, ge=0)   # llamacpp: longest resident prefix kept across calls
    prefix_cache_mb: Real | None = Field(None, ge=0)   # torch engine: KV of shared prefixes kept across calls (0: within a call)
    think_tag: str | None = None           # reasoning opener for Capability Injection (default: from the chat template)
    chat_template: str | None = None       # openai: tokenizer folder, tokenizer_config.json, Jinja file, or server
    prefill: str | None = None             # openai: continue_final_message (vLLM) for Capability Injection

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class RunSettingsFields(BaseModel):
    """The settings a YAML run config (config.RunConfig, which may hold grids) shares with one
    run request, checked the same way in both."""

    model_config = ConfigDict(extra="forbid")
    data: Annotated[str | None, AfterValidator(check_data)] = None
    limit: Whole | None = Field(None, ge=1)
    scoring: str | None = None
    judge: JudgeSpec = None
    extractor: OptionalSpec = None         # model-based answer extraction, reported apart
    repeats: Whole = Field(1, ge=1, le=100)
    allow_greedy_repeats: bool = False
    protocol: str | None = None
    concurrency: Whole | None = Field(None, ge=1, le=4096)
    decoding: GivenDecoding = Field(default_factory=Decoding)     # only the fields set count (protocol.py)
    judge_decoding: GivenDecoding = Field(default_factory=Decoding)


class RunRequest(RunSettingsFields):
    """Everything one run needs. `decoding` and `judge_decoding` hold what the caller set (only
    the fields set count; the rest comes from the suite's paper protocol, protocol.py)."""

    suite: str
    model: ModelSpec = DEFAULT_MODEL
    strategies: Strategies = None
    out: Path | None = None
    use_cache: bool = True
    backend_options: BackendOptions = Field(default_factory=BackendOptions)
    # the judge's and the extractor's own backend options (a judge on its own endpoint)
    judge_options: BackendOptions = Field(default_factory=BackendOptions)
    extractor_options: BackendOptions = Field(default_factory=BackendOptions)
    options: dict[str, Any] = Field(default_factory=dict)     # the suite's --set options
    overwrite: bool = False
    progress: bool = True
    report: bool = True


def make_request(data: dict[str, Any], *, file: str | Path | None = None,
                 name_of: Callable[[tuple], str] | None = None) -> RunRequest:
    """A RunRequest, or one InputError naming the first bad field (as `name_of` calls it: the
    CLI names its flags) and what it expected."""
    try:
        return RunRequest.model_validate(data)
    except ValidationError as exc:
        raise request_error(exc, file=file, name_of=name_of) from None


def request_error(exc: ValidationError, *, file=None, line=None,
                  name_of: Callable[[tuple], str] | None = None) -> InputError:
    errors = exc.errors()
    err = errors[0]
    loc = tuple(err.get("loc", ()))
    msg = expected(err, str(err.get("msg", exc)))
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    field = name_of(loc) if name_of else ".".join(str(p) for p in loc)
    out = InputError(msg, file=str(file) if file else None, line=line, field=field or None)
    out.dump = str(exc)
    return out
