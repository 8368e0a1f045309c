"""Any OpenAI-compatible server through the `openai` SDK: OpenAI, `vllm serve`, Ollama, llama.cpp
server, the Gemini and Anthropic compatibility endpoints.

- The API key comes from an environment variable only (OPENAI_API_KEY unless `api_key_env` names
  another); it is never written to the manifest, records or logs (error texts are scrubbed of it).
- At most `concurrency` requests are in flight; each has a timeout.
- 429, 5xx, timeouts and connection errors are retried with exponential backoff and full jitter,
  honouring Retry-After (up to `backoff_max`) when the server sends it. Other 4xx errors fail at once.
  A Retry-After past max(3 x timeout, 30 s), the time the run waits for a dead endpoint, says the
  endpoint will not serve this run: `fatal_error`, instead of retries that cannot succeed.
- A reply body is read up to MAX_REPLY_BYTES once decompressed (a gzip bomb fails the call).
- Fail fast: 401, 403, 404 or "model not found" set `fatal_error` at once, and so does a server
  that refuses connections `connect_retries` times in a row; the runner then stops the run (exit 3,
  records kept). The runner also stops after `max_consecutive_failures` failed calls in a row.
- A dead endpoint (every request times out or gets a 5xx, none answered since the first of
  them failed) sets `fatal_error` once that has lasted `down_after` seconds (default
  min(max(2 x timeout, 10 s), max(3 x timeout, 30 s) - timeout - 2 s)), so the run stops within
  max(3 x timeout, 30 s) of the first failure; retry waits never run past that point. A 429 with
  a valid Retry-After is a live server asking to wait, and does not count; a bare 429 does (a
  Retry-After of -5, NaN or inf is read as absent).

Speed (bench/foundation.py): requests go through the SDK's generic `client.post` with plain dict
bodies and come back as plain JSON, which skips the SDK's per-request parameter transform and
response models (about 0.5 ms of CPU per request). Connections are spread over several small
HTTP pools, since a pool's bookkeeping grows with the number of connections it holds.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib.util
import json
import math
import os
import random
import re
import sys
import time
import zlib
from dataclasses import dataclass, fields
from typing import Any, Sequence

from .. import limits
from ..errors import BackendError
from ..loop import API_CONCURRENCY, check_stop
from ..records import Decoding
from . import OPENAI_HINT
from .base import (CHAT, CHAT_TEMPLATE, COMPLETE, LOGPROB, PREFILL, Backend, GenRequest, GenResult, ScoreRequest,
                   ScoreResult)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
POOL_SIZE = 16          # connections per HTTP client; more clients for higher concurrency
TOP_LOGPROBS = 20       # the most the OpenAI API (and vLLM by default) returns
# The largest reply body read, once decompressed: a chat reply with top-20 log-probs for 4096
# tokens is about 7 MB.
MAX_REPLY_BYTES = 64 * 1024 * 1024


class RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _seconds(value: Any, scale: float = 1.0) -> float | None:
    """A wait a server asked for, or None where it is not a finite number of seconds, 0 or more
    (-5, NaN, inf: as if the header were absent)."""
    try:
        s = float(value) * scale
    except (TypeError, ValueError):
        return None
    return s if math.isfinite(s) and s >= 0 else None


def _retry_after(exc: Any) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None) or {}
    for key in ("retry-after-ms", "Retry-After-Ms"):
        if key in headers and (s := _seconds(headers[key], 0.001)) is not None:
            return s
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    if value is None:
        return None
    if _seconds(value) is not None:
        return _seconds(value)
    try:
        float(value)
        return None         # a number, but not a wait
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class BadReply(Exception):
    """A 200 reply that holds no answer (no choices, content null): the call failed."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


def _body(resp: Any) -> str:
    return json.dumps(resp, ensure_ascii=False, default=str)[:500]


def first_choice(resp: Any) -> dict[str, Any]:
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise BadReply(f"the server's reply has no choices: {_body(resp)}")
    return choices[0]


class EndpointDown(Exception):
    """Raised instead of sending a request once `fatal_error` is set."""


class ReplyTooLarge(Exception):
    """A reply body past MAX_REPLY_BYTES (decompressed): the call fails, without a retry."""

    def __init__(self, limit: int, encoding: str | None):
        how = f" once {encoding}-decompressed" if encoding else ""
        super().__init__(f"the server's reply is over {limit / (1 << 20):g} MiB{how}; not read further")


class _BoundedBody:
    """A response body (an async iterable of raw chunks) decoded here, gzip and deflate in
    pieces of at most 64 KiB, and cut at `limit` bytes: a small gzip bomb never inflates in
    memory. Encodings other than these are refused (the client only asks for these)."""

    PIECE = 1 << 16

    def __init__(self, raw, encoding: str | None, limit: int):
        self.raw, self.encoding, self.limit = raw, encoding, limit

    async def __aiter__(self):
        enc = self.encoding
        d = None if enc is None else zlib.decompressobj(zlib.MAX_WBITS | 16 if enc in ("gzip", "x-gzip")
                                                        else zlib.MAX_WBITS)
        first, total = True, 0
        async for data in self.raw:
            while data:
                if d is None:
                    out, data = data, b""
                else:
                    try:
                        out = d.decompress(data, self.PIECE)
                    except zlib.error:
                        if not (first and enc == "deflate"):
                            raise
                        enc = "raw deflate"         # no zlib header, as some servers send it
                        d = zlib.decompressobj(-zlib.MAX_WBITS)
                        continue
                    data = d.unconsumed_tail
                first = False
                total += len(out)
                if total > self.limit:
                    raise ReplyTooLarge(self.limit, enc)
                if out:
                    yield out
        if d is not None and (tail := d.flush()):
            if total + len(tail) > self.limit:
                raise ReplyTooLarge(self.limit, enc)
            yield tail


def _encoding(value: str | None) -> str | None:
    """The one content-encoding a body is decoded from (None: identity); BadReply for others."""
    codings = [c.strip().lower() for c in (value or "").split(",") if c.strip().lower() not in ("", "identity")]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return codings[0]
    raise BadReply(f"the server's reply is in content-encoding {value!r}, which was not asked for")


async def _bound_reply(response) -> None:
    """httpx2 response hook, before the body is read: decode it here, within MAX_REPLY_BYTES."""
    enc = _encoding(response.headers.get("content-encoding"))
    response.stream = _stream_class()(response.stream, enc)
    if enc is not None:
        del response.headers["content-encoding"]      # decoded here: httpx2 must not decode it again


@functools.cache
def _stream_class():
    import httpx2

    class BoundedStream(httpx2.AsyncByteStream):
        def __init__(self, inner, encoding: str | None):
            self.inner, self.body = inner, _BoundedBody(inner, encoding, MAX_REPLY_BYTES)

        async def __aiter__(self):
            async for chunk in self.body:
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedStream


async def _read_aiohttp(resp) -> bytes:
    """An aiohttp body (decompressed by aiohttp in bounded pieces), cut at MAX_REPLY_BYTES."""
    parts, total = [], 0
    async for chunk in resp.content.iter_any():
        total += len(chunk)
        if total > MAX_REPLY_BYTES:
            resp.close()
            raise ReplyTooLarge(MAX_REPLY_BYTES, resp.headers.get("Content-Encoding"))
        parts.append(chunk)
    return b"".join(parts)


class HTTPStatusError(Exception):
    """An error status from the aiohttp transport (the SDK raises its own APIStatusError)."""

    def __init__(self, status_code: int, message: str, headers: dict[str, str]):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code, self.message = status_code, message
        self.response = type("Resp", (), {"headers": {k.lower(): v for k, v in headers.items()}})()


def _error_message(text: str) -> str:
    try:
        err = json.loads(text).get("error")
        return str(err.get("message") if isinstance(err, dict) else err)[:300]
    except (ValueError, AttributeError):
        return text[:300]


FATAL_STATUS = {401, 403, 404}
_MODEL_MISSING = re.compile(r"model\b.*\b(not found|does not exist|not exist|unknown)|unknown model|no such model", re.I)


def _sdk_error(exc: BaseException, *names: str) -> bool:
    """Whether exc is one of the openai SDK's errors `names`. The SDK is imported with the first
    client; before that no error can be one of its types, so this never imports it."""
    sdk = sys.modules.get("openai")
    return sdk is not None and isinstance(exc, tuple(getattr(sdk, n) for n in names))


def _status(exc: BaseException) -> tuple[int | None, str]:
    if isinstance(exc, HTTPStatusError):
        return exc.status_code, exc.message
    if _sdk_error(exc, "APIStatusError"):
        return exc.status_code, str(exc.message)
    return None, ""


def fatal_reason(exc: BaseException) -> bool:
    """Errors no retry or later request can fix: bad key, no access, wrong URL or model."""
    status, message = _status(exc)
    if status in FATAL_STATUS:
        return True
    return status == 400 and bool(_MODEL_MISSING.search(message or ""))


def refused(exc: BaseException) -> bool:
    """Nothing listens there (connection refused, unknown host): not a dropped connection."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:
        if isinstance(cur, ConnectionRefusedError) or type(cur).__name__ in ("ConnectError", "ClientConnectorError"):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def _timed_out(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError) or _sdk_error(exc, "APITimeoutError"):
        return True
    try:
        import aiohttp

        return isinstance(exc, aiohttp.ServerTimeoutError)
    except ImportError:
        return False


def classify(exc: BaseException) -> RetryableError | None:
    """Which errors deserve another try."""
    if isinstance(exc, HTTPStatusError):
        if exc.status_code in RETRY_STATUS:
            return RetryableError(str(exc), _retry_after(exc))
        return None
    try:
        import aiohttp

        if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
            return RetryableError(f"{type(exc).__name__}: {exc}")
    except ImportError:
        pass

    if isinstance(exc, asyncio.TimeoutError) or _sdk_error(exc, "APITimeoutError", "APIConnectionError"):
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if _sdk_error(exc, "APIStatusError") and exc.status_code in RETRY_STATUS:
        return RetryableError(f"HTTP {exc.status_code}: {exc.message}", _retry_after(exc))
    return None


def api_key(base_url: str | None, env: str) -> str:
    """The key from the environment variable `env` (never from a file); "EMPTY" for a local server."""
    key = os.environ.get(env)
    if key:
        return key
    if base_url and any(h in base_url for h in ("127.0.0.1", "localhost", "[::1]")):
        return "EMPTY"   # local servers usually take any key
    raise BackendError(f"set the API key in the environment variable {env} (or pass --base-url for a local server)")

@dataclass(frozen=True)
class EndpointOptions:
    """The openai backend's own options (--backend-opt KEY=VALUE), with their defaults; values
    are converted where the backend reads them (a bad one: "bad option value")."""

    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = API_CONCURRENCY
    timeout: float = 120.0
    max_retries: int = 6
    backoff_base: float = 0.5
    backoff_max: float = 60.0
    endpoint: str = "chat"
    tokenizer: str | None = None
    freeze_gc: bool = True
    transport: str = "sdk"
    connect_retries: int = 2
    max_consecutive_failures: int = 10
    chat_template: str | None = None
    prefill: str | None = None
    down_after: float | None = None


ENDPOINT_FIELDS = frozenset(f.name for f in fields(EndpointOptions))


class OpenAIBackend(Backend):
    backend = "openai"
    batching = False
    option_names = ENDPOINT_FIELDS | {"think_tag"}
    # how to enable an assistant-turn prefill (Capability Injection) when none is configured
    prefill_hint = ("pass --backend-opt chat_template=PATH (a tokenizer folder, tokenizer_config.json or Jinja "
                    "file; the completions endpoint then gets the rendered prompt), chat_template=server "
                    "(llama.cpp's llama-server reports its template), or prefill=continue_final_message (vLLM)")

    def __init__(self, name: str, decoding: Decoding | None = None, **options: Any):
        """options: the fields of EndpointOptions (as --backend-opt gives them), and the backend's
        common ones (think_tag)."""
        own = EndpointOptions(**{k: options.pop(k) for k in list(options) if k in ENDPOINT_FIELDS})
        super().__init__(name, decoding, **options)
        base_url, api_key_env, endpoint, transport = own.base_url, own.api_key_env, own.endpoint, own.transport
        tokenizer, chat_template, prefill = own.tokenizer, own.chat_template, own.prefill
        try:
            import httpx2
        except ImportError:  # pragma: no cover - core dependency
            raise BackendError(OPENAI_HINT) from None
        if importlib.util.find_spec("openai") is None:  # pragma: no cover - core dependency
            raise BackendError(OPENAI_HINT)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None     # empty: unset
        if self.base_url is not None and (bad := url_problem(self.base_url)):
            where = "base_url" if base_url else "OPENAI_BASE_URL"
            raise BackendError(f"{where} {_public_url(self.base_url)!r} {bad}")
        key = api_key(self.base_url, api_key_env or "OPENAI_API_KEY")
        if endpoint not in ("chat", "completions"):
            raise BackendError(f"endpoint must be 'chat' or 'completions', not '{endpoint}'")
        self._secret = key if len(key) >= 6 and key != "EMPTY" else None
        if transport not in ("sdk", "aiohttp"):
            raise BackendError(f"transport must be 'sdk' or 'aiohttp', not '{transport}'")
        if transport == "aiohttp":
            try:
                import aiohttp  # noqa: F401
            except ImportError:
                raise BackendError("transport=aiohttp needs aiohttp: pip install aiohttp") from None
        self.transport = transport
        self._key = key
        self._session = None
        self.endpoint = endpoint
        self.concurrency = max(1, int(own.concurrency))
        self.timeout = float(own.timeout)
        self.max_retries = int(own.max_retries)
        self.connect_retries = int(own.connect_retries)
        self.max_consecutive_failures = int(own.max_consecutive_failures)   # read by the runner; 0: never stop
        self.fatal_error: str | None = None     # set once the endpoint cannot serve this run
        self._answered = False                  # has any request succeeded yet
        self._init_down(own.down_after)
        self._first_lock: asyncio.Lock | None = None
        self.backoff_base, self.backoff_max = float(own.backoff_base), float(own.backoff_max)
        self._response_type = httpx2.Response
        shards = math.ceil(self.concurrency / POOL_SIZE)
        per = math.ceil(self.concurrency / shards) + 2
        limits = httpx2.Limits(max_connections=per, max_keepalive_connections=per)
        tls = httpx2.create_ssl_context()     # one for all clients: loading the CA store takes 17 ms
        try:
            self._http = [] if transport == "aiohttp" else [httpx2.AsyncClient(
                limits=limits, timeout=self.timeout, verify=tls, headers={"Accept-Encoding": "gzip, deflate"},
                event_hooks={"response": [_bound_reply]}) for _ in range(shards)]
        except ImportError as exc:      # a SOCKS proxy in the environment, without its package
            raise BackendError(_proxy_problem(exc)) from None
        # the SDK's clients over them, made at the first request: `import openai` takes about 0.5 s,
        # which a run that stops before any call (bad input, a finished run) need not pay
        self._clients: list = []
        self._load = [0] * max(1, len(self._http))   # requests in flight per client
        self._sem: asyncio.Semaphore | None = None
        self._tokenizer_path = tokenizer
        self._tokenizer = None
        caps = {CHAT, COMPLETE, LOGPROB}
        if tokenizer:
            caps.add(CHAT_TEMPLATE)
        self._template = None           # a client-side template (chat_template.Template)
        self._template_folder: str | None = None
        self._template_mode = self._template_option(chat_template, tokenizer)
        self._template_given = chat_template or tokenizer or None     # as given: part of the cache key
        if self._template_mode in ("file", "folder"):
            caps.add(CHAT_TEMPLATE)
        if prefill not in (None, "continue_final_message"):
            raise BackendError(f"prefill must be 'continue_final_message' (vLLM), not '{prefill}'")
        self.prefill = prefill
        if prefill:
            caps.add(PREFILL)
        self.capabilities = frozenset(caps)
        self.calls = 0          # requests sent, retries included
        self.retries = 0
        self.waits: list[float] = []   # seconds slept before each retry
        self.freeze_gc = bool(own.freeze_gc)
        self._frozen = False

    def endpoint_url(self) -> str:
        """The base URL without credentials or query (what the manifest records: a key may sit in
        either)."""
        url = _public_url(self.base_url)
        return url.split("?", 1)[0].split("#", 1)[0] if url else "https://api.openai.com/v1"

    @property
    def client(self):
        """The first SDK client (all share the key and base URL)."""
        return self._sdk_clients()[0]

    def _sdk_clients(self) -> list:
        if not self._clients and self._http:
            import openai

            self._clients = [openai.AsyncOpenAI(api_key=self._key, base_url=self.base_url, max_retries=0,
                                                timeout=self.timeout, http_client=h) for h in self._http]
        return self._clients

    def identity(self) -> dict[str, Any]:
        out = {"backend": self.backend, "model": self.name, "base_url": _public_url(self.base_url) or "default"}
        # how the same request is served: the completions endpoint renders messages with a client
        # template, a prefill continues the last assistant turn where chat would open a new one.
        # Absent at the defaults, so a default setup's cached answers keep their keys.
        if self.endpoint != "chat":
            out["endpoint"] = self.endpoint
            if self._template_given:
                out["chat_template"] = self._template_given
        if self.prefill:
            out["prefill"] = self.prefill
        return out

    def secrets(self) -> tuple[str, ...]:
        """The API key, and a password in the base URL: masked in everything the run writes."""
        out = [self._secret] if self._secret else []
        try:
            _, auth = _split_credentials(self.base_url or "")
        except ValueError:
            auth = None
        if auth and len(auth[1]) >= 6:
            out.append(auth[1])
        return tuple(out)

    def info(self) -> dict[str, Any]:
        return {"base_url": self.endpoint_url(), "concurrency": self.concurrency,
                "timeout_s": self.timeout, "max_retries": self.max_retries, "endpoint": self.endpoint,
                "requests_sent": self.calls, "retries": self.retries, **self._prefill_info(),
                "retry_wait_s": round(sum(self.waits), 3)}

    @property
    def _first(self) -> asyncio.Lock:
        if self._first_lock is None:
            self._first_lock = asyncio.Lock()
        return self._first_lock

    @property
    def sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    # -- retry loop ---------------------------------------------------------------------------
    def backoff_delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform(0, min(cap, base * 2^attempt)); Retry-After wins if longer,
        up to the cap (a server asking for an hour should not stall a run for an hour)."""
        delay = random.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** attempt))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries; returns the response JSON."""
        if not self._answered:
            # Until the endpoint has answered once, requests go one at a time: a bad key or a
            # dead server then costs one request, not `concurrency` of them.
            async with self._first:
                if not self._answered:
                    return await self._post_retrying(path, body)
        return await self._post_retrying(path, body)

    async def _post_retrying(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        attempt = refusals = 0
        while True:
            check_stop()                # a stopped run sends nothing new (models/engine_calls.py)
            self._check_down()          # raises once another request found the endpoint unusable
            try:
                async with self.sem, limits.slot(self.base_url):   # limits: a sweep's cap per endpoint
                    self.calls += 1
                    if self.transport == "aiohttp":       # aiohttp enforces the total timeout itself
                        out = await self._post_aiohttp(path, body)
                        self._up()
                        return out
                    i = min(range(len(self._load)), key=self._load.__getitem__)
                    self._load[i] += 1
                    try:
                        # a total-time guard on top of the HTTP client's per-phase timeouts
                        async with asyncio.timeout(self.timeout + 5):
                            resp = await self._sdk_clients()[i].post(path, body=body, cast_to=self._response_type)
                    finally:
                        self._load[i] -= 1
                out = resp.json()
                self._up()
                return out
            except Exception as exc:  # noqa: BLE001
                if fatal_reason(exc):
                    self.fatal_error = self._describe(exc)
                    raise
                if refused(exc):
                    refusals += 1
                    if refusals > self.connect_retries:
                        self.fatal_error = f"cannot connect to {_public_url(self.base_url) or 'the API'}: {self._describe(exc)}"
                        raise
                retry = classify(exc)
                self._failed(exc, retry)
                if retry is not None and retry.retry_after is not None and retry.retry_after > self.stop_within:
                    # the server will not serve within the time the run waits for an endpoint
                    self.fatal_error = (f"{_public_url(self.base_url) or 'the API'} answers {self._describe(exc)} "
                                        f"and asks to wait {_duration(retry.retry_after)} (Retry-After), past the "
                                        f"{self.stop_within:g} s this run waits for an endpoint; rerun later")
                    raise
                if self.fatal_error or retry is None or attempt >= self.max_retries:
                    raise
                attempt += 1
                self.retries += 1
                delay = self._until_down(self.backoff_delay(attempt, retry.retry_after))
                self.waits.append(delay)
                await asyncio.sleep(delay)

    # -- a dead endpoint ----------------------------------------------------------------------
    def _init_down(self, down_after: float | None) -> None:
        budget = max(3 * self.timeout, 30.0)
        self.stop_within = budget        # a Retry-After past this: the endpoint will not serve the run
        self.down_after = float(down_after) if down_after is not None else \
            max(0.5, min(max(2 * self.timeout, 10.0), budget - self.timeout - 2.0))
        self._down_since: float | None = None   # first failure with no answer since (monotonic)
        self._down_n = 0                        # requests failed since then
        self._down_last: BaseException | None = None

    def _up(self) -> None:
        self._answered = True
        self._down_since, self._down_n = None, 0

    def _failed(self, exc: BaseException, retry: RetryableError | None) -> None:
        """Count a timeout, 5xx or bare 429 towards the endpoint being down (not a 429 with a valid
        Retry-After: a live server asking to wait)."""
        if retry is None or (_status(exc)[0] == 429 and retry.retry_after is not None) or not self.down_after:
            return
        if self._down_since is None:
            self._down_since, self._down_n = time.monotonic(), 0
        self._down_n += 1
        self._down_last = exc
        self._check_down(raise_=False)

    def _check_down(self, raise_: bool = True) -> None:
        if not self.fatal_error and self._down_since is not None and self.down_after \
                and time.monotonic() - self._down_since >= self.down_after:
            self.fatal_error = self._down_reason()
        if self.fatal_error and raise_:
            raise EndpointDown(self.fatal_error)

    def _until_down(self, delay: float) -> float:
        """A retry wait never runs past the moment the endpoint counts as down."""
        if self._down_since is None or not self.down_after:
            return delay
        return max(0.0, min(delay, self._down_since + self.down_after - time.monotonic()))

    def _down_reason(self) -> str:
        url = _public_url(self.base_url) or "the API"
        n, exc = self._down_n, self._down_last
        if exc is not None and _timed_out(exc):
            return f"no answer within {self.timeout:g} s from {url}, {n} request{'s' if n != 1 else ''}"
        secs = time.monotonic() - (self._down_since or time.monotonic())
        last = self._describe(exc) if exc is not None else "?"
        return f"every request to {url} failed for {secs:.0f} s ({n} requests), the last with: {last}"

    async def _post_aiohttp(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The same request straight over aiohttp: about a third of the CPU per request of the
        SDK's httpx stack, which is what limits throughput at high concurrency (bench/README.md)."""
        import aiohttp

        if self._session is None:
            # user:password in the URL means HTTP basic auth, sent instead of the bearer key, as
            # the SDK transport does (aiohttp refuses both at once)
            base, auth = _split_credentials(self.base_url or "https://api.openai.com/v1")
            self._url = base.rstrip("/")
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.concurrency + 8),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                auth=aiohttp.BasicAuth(*auth) if auth else None,
                headers=None if auth else {"Authorization": f"Bearer {self._key}"})
        url = self._url + path
        async with self._session.post(url, json=body, headers={"Accept-Encoding": "gzip, deflate"}) as resp:
            data = await _read_aiohttp(resp)
            if resp.status >= 400:
                text = data.decode("utf-8", errors="replace")
                raise HTTPStatusError(resp.status, _error_message(text), dict(resp.headers))
            return json.loads(data)

    def _describe(self, exc: BaseException) -> str:
        text = _describe(exc)
        if self._secret:
            text = text.replace(self._secret, "***")
        return text

    # -- generation ---------------------------------------------------------------------------
    def _sampling(self, decoding: Decoding, req: GenRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"temperature": decoding.temperature, "top_p": decoding.top_p,
                              "max_tokens": req.max_tokens or decoding.max_tokens, "seed": decoding.seed}
        stop = req.stop if req.stop is not None else decoding.stop
        if stop:
            kw["stop"] = stop[:4]
        return kw

    async def _one(self, req: GenRequest, decoding: Decoding) -> GenResult:
        kw = self._sampling(decoding, req)
        try:
            if req.messages is not None and self.endpoint == "chat":
                msgs = [m.model_dump() for m in req.messages]
                if self.prefill and msgs[-1]["role"] == "assistant":
                    # vLLM: continue the last (assistant) message instead of opening a new turn
                    kw.update(continue_final_message=True, add_generation_prompt=False)
                resp = await self._post("/chat/completions", {"model": self.name, "messages": msgs, **kw})
                choice = first_choice(resp)
                text = (choice.get("message") or {}).get("content")
            else:
                prompt = req.prompt if req.prompt is not None else self.render_chat(req.messages or [])
                resp = await self._post("/completions", {"model": self.name, "prompt": prompt, **kw})
                choice = first_choice(resp)
                text = choice.get("text")
            if text is None:    # a failed call (retried on resume), not an empty answer
                raise BadReply(f"the server's reply has no content (finish_reason "
                               f"{choice.get('finish_reason')!r}): {_body(resp)}")
            usage = resp.get("usage") or {}
            return GenResult(text=text, finish_reason=choice.get("finish_reason"),
                             prompt_tokens=usage.get("prompt_tokens"),
                             completion_tokens=usage.get("completion_tokens"))
        except Exception as exc:  # noqa: BLE001 - the error is recorded, the run goes on
            return GenResult(error=self._describe(exc))

    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        if len(requests) == 1:      # the runner's usual case: no extra task per request
            return [await self._one(requests[0], decoding)]
        return list(await asyncio.gather(*(self._one(r, decoding) for r in requests)))

    # -- scoring --------------------------------------------------------------------------------
    async def _score_one(self, req: ScoreRequest) -> ScoreResult:
        """Chat: read the first generated token's top-20 log-probs (options must differ in their
        first token; an option outside the top 20 scores -inf, and if every option is outside,
        the call fails rather than guess). Raw prompt: exact log-likelihood from the completions
        endpoint with echo=True (vLLM and llama.cpp support it), one request per option."""
        try:
            if req.messages is not None and self._tokenizer_path is None:
                return await self._score_chat(req)
            context = (req.prompt if req.prompt is not None else self.render_chat(req.messages or [])) \
                + req.assistant_prefix
            pairs = await asyncio.gather(*(self._score_echo(context, c) for c in req.continuations))
            return ScoreResult(logprobs=[lp for lp, _ in pairs], token_counts=[n for _, n in pairs])
        except Exception as exc:  # noqa: BLE001
            return ScoreResult(error=self._describe(exc))

    async def _score_chat(self, req: ScoreRequest) -> ScoreResult:
        msgs = [m.model_dump() for m in req.messages or []]
        if req.assistant_prefix:
            msgs.append({"role": "assistant", "content": req.assistant_prefix})
        resp = await self._post("/chat/completions", {
            "model": self.name, "messages": msgs, "max_tokens": 1, "temperature": 0.0,
            "logprobs": True, "top_logprobs": TOP_LOGPROBS})
        logprobs = first_choice(resp).get("logprobs") or {}
        content = logprobs.get("content") or []
        if not content:
            raise BackendError("the server returned no log-probs (does it support logprobs=true?)")
        top: dict[str, float] = {}
        for alt in content[0].get("top_logprobs") or []:
            key, lp = alt["token"].strip(), float(alt["logprob"])
            if math.isnan(lp) or lp == math.inf:
                raise BadReply(f"the server's log-prob for {alt['token']!r} is {lp!r}: {_body(resp)}")
            top[key] = max(top.get(key, -math.inf), lp)
        lps = [top.get(c.strip(), -math.inf) for c in req.continuations]
        if all(lp == -math.inf for lp in lps):
            seen = ", ".join(repr(k) for k in list(top)[:5])
            raise BackendError(f"no option is among the top-{TOP_LOGPROBS} first tokens (top: {seen})")
        return ScoreResult(logprobs=lps, token_counts=[1] * len(lps))

    async def _score_echo(self, context: str, cont: str) -> tuple[float, int]:
        full = context + cont
        resp = await self._post("/completions", {
            "model": self.name, "prompt": full, "max_tokens": 1, "echo": True, "logprobs": 1,
            "temperature": 0.0})
        lp = first_choice(resp).get("logprobs") or {}
        offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
        if not offsets or values is None:
            raise BackendError("the server returned no echoed log-probs (does it support echo=true?)")
        total, n = 0.0, 0
        # A token counts if it covers any character of the continuation, so "Answer: " + "A"
        # still scores the merged token " A". The one generated token starts at len(full): skipped.
        ends = list(offsets[1:]) + [len(full)]
        for start, end, val in zip(offsets, ends, values):
            if start < len(full) and max(end, start + 1) > len(context) and val is not None:
                total += float(val)
                n += 1
        if n == 0:
            raise BackendError(f"no echoed token covers the continuation {cont!r}")
        return total, n

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        if len(requests) == 1:
            return [await self._score_one(requests[0])]
        return list(await asyncio.gather(*(self._score_one(r) for r in requests)))

    # -- chat template (optional: a local tokenizer/template, or the server's) -----------------
    def _template_option(self, value: str | None, tokenizer: str | None) -> str:
        """'folder' (transformers renders), 'file', 'server', 'off', or 'auto' (ask the server
        once, when a prefill is needed: probe())."""
        if value in (None, ""):
            return "folder" if tokenizer else "auto"
        if value in ("server", "off"):
            return value
        from pathlib import Path

        if Path(value).is_dir():
            self._template_folder = value
            return "folder"
        from .chat_template import from_file

        self._template = from_file(value)
        return "file"

    def _prefill_info(self) -> dict[str, Any]:
        if self.prefill:
            return {"prefill": self.prefill}
        if self._template is not None:
            return {"chat_template": self._template.origin}
        folder = self._template_folder or self._tokenizer_path
        return {"chat_template": f"folder {folder}"} if folder else {}

    def probe(self, cap: str) -> bool:
        """CHAT_TEMPLATE: without a local template, ask the server for its own (llama-server's
        GET /props) once; the capability is there if it answers with one."""
        if cap == CHAT_TEMPLATE and cap not in self.capabilities and self._template_mode in ("auto", "server"):
            from .chat_template import from_server

            self._template = from_server(self.base_url, self._key, timeout=min(self.timeout, 10.0))
            self._template_mode = "file" if self._template is not None else "off"
            if self._template is not None:
                self.capabilities = self.capabilities | {CHAT_TEMPLATE}
        return self.supports(cap)

    def _hf_tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._template_folder
                                                            or self._tokenizer_path)
        return self._tokenizer

    def chat_template_source(self):
        if self._template is not None:
            return self._template.source
        if not (self._tokenizer_path or self._template_folder):
            return None
        return getattr(self._hf_tokenizer(), "chat_template", None)

    def render_chat(self, messages, add_generation_prompt=True) -> str:
        self.require(CHAT_TEMPLATE, "pass tokenizer=/local/tokenizer/folder or chat_template=PATH|server to "
                                    "render the chat template client-side for the completions endpoint")
        msgs = [m.model_dump() for m in messages]
        if self._template is not None:
            return self._template.render(msgs, add_generation_prompt=add_generation_prompt)
        return self._hf_tokenizer().apply_chat_template(msgs, add_generation_prompt=add_generation_prompt,
                                                        tokenize=False)

    async def prepare(self) -> None:
        """Move every object alive now (modules, dataset, torch if loaded) out of the garbage
        collector's view for the run: a full collection of a heap with torch in it stalls the
        event loop ~100 ms, and every request in flight with it (bench/README.md). Undone in
        close(), so nothing stays frozen after the run."""
        if self.freeze_gc and not self._frozen:
            gc.collect()
            gc.freeze()
            self._frozen = True

    async def close(self) -> None:
        try:
            if self._session is not None:
                await self._session.close()
                self._session = None
            for client in self._clients:        # each closes its HTTP client
                await client.close()
            if not self._clients:
                for http in self._http:
                    await http.aclose()
        finally:
            if self._frozen:
                gc.unfreeze()
                self._frozen = False


def url_problem(url: str) -> str | None:
    """What makes `url` unusable as a base URL (None: nothing): control characters or spaces
    (a CR/LF would split the request head), a scheme other than http(s), no host, a bad port."""
    from urllib.parse import urlsplit

    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        bad = next(c for c in url if ord(c) < 33 or ord(c) == 127)
        return f"holds the character {bad!r}; give http(s)://HOST[:PORT]/v1"
    try:
        parts = urlsplit(url)
        parts.port      # raises ValueError past 65535 or for a non-number
    except ValueError as exc:
        return f"is not a valid URL ({exc}); give http(s)://HOST[:PORT]/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not a valid URL; give http(s)://HOST[:PORT]/v1"
    if parts.port == 0:
        return "has port 0; give http(s)://HOST[:PORT]/v1 with a port from 1 to 65535"
    return None


def _proxy_problem(exc: ImportError) -> str:
    """The one line for a proxy from the environment that httpx2 cannot use (SOCKS without socksio)."""
    for name in ("ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        value = os.environ.get(name, "")
        if value.lower().startswith("socks"):
            return (f"the proxy in {name} ({_public_url(value)}) is a SOCKS proxy, which needs the socksio package "
                    f"(pip install socksio); install it, or unset {name}")
    return f"cannot set up the HTTP client: {exc}"


def _duration(seconds: float) -> str:
    if seconds == math.inf:
        return "forever"
    if seconds >= 1000 * 365 * 86400:       # not a 300-digit number of years
        return "over 1,000 years"
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("hours", 3600)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _public_url(url: str | None) -> str | None:
    """The URL without user:password@ (never written to the manifest)."""
    if not url or "@" not in url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=host))


def _split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """'http://u:p@host/v1' -> ('http://host/v1', ('u', 'p'))."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    return _public_url(url), (unquote(parts.username), unquote(parts.password or ""))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HTTPStatusError):
        return str(exc)[:500]
    if isinstance(exc, (BadReply, ReplyTooLarge)):
        return str(exc)[:600]
    if _sdk_error(exc, "APIStatusError"):
        msg = re.sub(r"^Error code: \d+ - ", "", str(exc.message))
        return f"HTTP {exc.status_code}: {msg}"[:500]
    return f"{type(exc).__name__}: {exc}"[:500]
