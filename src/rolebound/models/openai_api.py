"""Any OpenAI-compatible server through the `openai` SDK: OpenAI, `vllm serve`, Ollama, llama.cpp
server, the Gemini and Anthropic compatibility endpoints.

- The API key comes from an environment variable only (OPENAI_API_KEY unless `api_key_env` names
  another); it is never written to the manifest, records or logs.
- At most `concurrency` requests are in flight; each has a timeout.
- 429, 5xx, timeouts and connection errors are retried with exponential backoff and full jitter,
  honouring Retry-After when the server sends it. Other 4xx errors fail at once.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from typing import Any, Sequence

from ..errors import BackendError
from ..records import Decoding
from .base import CHAT, CHAT_TEMPLATE, COMPLETE, LOGPROB, Backend, GenRequest, GenResult, ScoreRequest, ScoreResult

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


class RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(exc: Any) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None) or {}
    for key in ("retry-after-ms", "Retry-After-Ms"):
        if key in headers:
            try:
                return float(headers[key]) / 1000.0
            except ValueError:
                pass
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def classify(exc: BaseException) -> RetryableError | None:
    """Which SDK errors deserve another try."""
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, asyncio.TimeoutError)):
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, openai.APIStatusError) and exc.status_code in RETRY_STATUS:
        return RetryableError(f"HTTP {exc.status_code}: {exc.message}", _retry_after(exc))
    return None


class OpenAIBackend(Backend):
    backend = "openai"
    batching = False

    def __init__(self, name: str, decoding: Decoding | None = None, *, base_url: str | None = None,
                 api_key_env: str | None = None, concurrency: int = 16, timeout: float = 120.0,
                 max_retries: int = 6, backoff_base: float = 0.5, backoff_max: float = 60.0,
                 endpoint: str = "chat", tokenizer: str | None = None, **options: Any):
        super().__init__(name, decoding, **options)
        try:
            import openai
        except ImportError:  # pragma: no cover - core dependency
            raise BackendError("the openai backend needs the openai SDK: pip install openai") from None
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        env = api_key_env or "OPENAI_API_KEY"
        key = os.environ.get(env)
        if not key:
            if self.base_url and any(h in self.base_url for h in ("127.0.0.1", "localhost", "[::1]")):
                key = "EMPTY"   # local servers usually take any key
            else:
                raise BackendError(f"set the API key in the environment variable {env} "
                                   "(or pass --base-url for a local server)")
        if endpoint not in ("chat", "completions"):
            raise BackendError(f"endpoint must be 'chat' or 'completions', not '{endpoint}'")
        self.endpoint = endpoint
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base, self.backoff_max = float(backoff_base), float(backoff_max)
        import httpx

        limits = httpx.Limits(max_connections=self.concurrency + 8,
                              max_keepalive_connections=self.concurrency + 8)
        self.client = openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout,
            http_client=httpx.AsyncClient(limits=limits, timeout=self.timeout))
        self._sem: asyncio.Semaphore | None = None
        self._tokenizer_path = tokenizer
        self._tokenizer = None
        caps = {CHAT, COMPLETE, LOGPROB}
        if tokenizer:
            caps.add(CHAT_TEMPLATE)
        self.capabilities = frozenset(caps)
        self.calls = 0          # requests sent, retries included
        self.retries = 0

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.name, "base_url": self.base_url or "default"}

    def info(self) -> dict[str, Any]:
        return {"base_url": self.base_url or "https://api.openai.com/v1", "concurrency": self.concurrency,
                "timeout_s": self.timeout, "max_retries": self.max_retries, "endpoint": self.endpoint,
                "requests_sent": self.calls, "retries": self.retries}

    @property
    def sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    # -- retry loop ---------------------------------------------------------------------------
    async def _with_retries(self, make_call):
        attempt = 0
        while True:
            try:
                async with self.sem:
                    self.calls += 1
                    return await asyncio.wait_for(make_call(), timeout=self.timeout + 5)
            except Exception as exc:  # noqa: BLE001
                retry = classify(exc)
                if retry is None or attempt >= self.max_retries:
                    raise
                attempt += 1
                self.retries += 1
                # full jitter: uniform(0, min(cap, base * 2^attempt)); Retry-After wins if longer
                delay = random.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** attempt))
                if retry.retry_after is not None:
                    delay = max(delay, min(retry.retry_after, self.backoff_max))
                await asyncio.sleep(delay)

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
                resp = await self._with_retries(lambda: self.client.chat.completions.create(
                    model=self.name, messages=msgs, **kw))
                choice = resp.choices[0]
                text = choice.message.content or ""
            else:
                prompt = req.prompt if req.prompt is not None else self.render_chat(req.messages or [])
                resp = await self._with_retries(lambda: self.client.completions.create(
                    model=self.name, prompt=prompt, **kw))
                choice = resp.choices[0]
                text = choice.text or ""
            usage = getattr(resp, "usage", None)
            return GenResult(text=text, finish_reason=getattr(choice, "finish_reason", None),
                             prompt_tokens=getattr(usage, "prompt_tokens", None),
                             completion_tokens=getattr(usage, "completion_tokens", None))
        except Exception as exc:  # noqa: BLE001 - the error is recorded, the run goes on
            return GenResult(error=_describe(exc))

    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        return list(await asyncio.gather(*(self._one(r, decoding) for r in requests)))

    # -- scoring --------------------------------------------------------------------------------
    async def _score_one(self, req: ScoreRequest) -> ScoreResult:
        """Chat: read the first generated token's top-20 log-probs (options must differ in their
        first token; an option outside the top 20 scores -inf). Raw prompt: exact log-likelihood
        from the completions endpoint with echo=True (vLLM and llama.cpp support it)."""
        try:
            if req.messages is not None and self._tokenizer_path is None:
                msgs = [m.model_dump() for m in req.messages]
                if req.assistant_prefix:
                    msgs.append({"role": "assistant", "content": req.assistant_prefix})
                resp = await self._with_retries(lambda: self.client.chat.completions.create(
                    model=self.name, messages=msgs, max_tokens=1, temperature=0.0,
                    logprobs=True, top_logprobs=20))
                content = resp.choices[0].logprobs.content or []
                top = {}
                if content:
                    for alt in content[0].top_logprobs:
                        key = alt.token.strip()
                        top[key] = max(top.get(key, -math.inf), alt.logprob)
                lps = [top.get(c.strip(), -math.inf) for c in req.continuations]
                return ScoreResult(logprobs=lps, token_counts=[1] * len(lps))
            context = (req.prompt if req.prompt is not None else self.render_chat(req.messages or [])) \
                + req.assistant_prefix
            lps, counts = [], []
            for cont in req.continuations:
                full = context + cont
                resp = await self._with_retries(lambda: self.client.completions.create(
                    model=self.name, prompt=full, max_tokens=1, echo=True, logprobs=1, temperature=0.0))
                lp = resp.choices[0].logprobs
                offsets, tok_lps = lp.text_offset, lp.token_logprobs
                total, n = 0.0, 0
                for off, val in zip(offsets, tok_lps):
                    # echo returns the prompt's tokens, then the one generated token: skip it
                    if len(context) <= off < len(full) and val is not None:
                        total += val
                        n += 1
                lps.append(total)
                counts.append(n)
            return ScoreResult(logprobs=lps, token_counts=counts)
        except Exception as exc:  # noqa: BLE001
            return ScoreResult(error=_describe(exc))

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        return list(await asyncio.gather(*(self._score_one(r) for r in requests)))

    # -- chat template (optional, from a local tokenizer folder) ------------------------------
    def render_chat(self, messages, add_generation_prompt=True) -> str:
        self.require(CHAT_TEMPLATE, "pass tokenizer=/local/tokenizer/folder to render the chat "
                                    "template client-side for the completions endpoint")
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_path)
        return self._tokenizer.apply_chat_template([m.model_dump() for m in messages],
                                                   add_generation_prompt=add_generation_prompt,
                                                   tokenize=False)

    async def close(self) -> None:
        await self.client.close()


def _describe(exc: BaseException) -> str:
    import openai

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"[:500]
    return f"{type(exc).__name__}: {exc}"[:500]
