"""A small OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

    with FakeServer(delay=0.1, reply="B") as srv:
        backend = OpenAIBackend("test-model", base_url=srv.url + "/v1")
        srv.fail(status=429, retry_after=1, times=2)     # the next two requests get 429
        ...
        srv.stats.max_in_flight, srv.stats.arrivals

Endpoints: POST /v1/chat/completions (vLLM's continue_final_message too), POST /v1/completions
(logprobs, top_logprobs, echo, list prompts), GET /v1/models, GET /props (llama-server's: the
`chat_template` given, else 404), and for a server run in another process with
`python -m rolebound.testing.fake_server`: GET /_fake/stats (the counters as JSON) and
POST /_fake/reset.

Broken servers, whole or in part: `srv.fail(**MODES["hang"])` (accepts, never answers),
`MODES["500"]`, `MODES["no-choices"]`, `MODES["null-content"]`; `--mode NAME` on the command line.
Hostile ones, whose replies a client must not keep or must bound: log-probs that are NaN,
Infinity or the literal 1e999, a `finish_reason` that is an object, a lone surrogate in the text,
a reply quoting the caller's API key, a gzip bomb, and a 429 whose Retry-After is ten years away
(`HOSTILE` lists them).

Answers are deterministic: `reply` (a fixed text, or a function of the request body), by default
an echo of the last message (chat) or of the prompt (completions). Text is cut into "tokens" by
`tokenize` and each token gets the log-prob `token_logprob` gives it, so tests can compute the
expected scores. The response delay is an asyncio.sleep, so hundreds of requests can wait at once.
Only the standard library; it binds to the loopback address and nothing else.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

HOST = "127.0.0.1"          # never anything else: this server is for local tests only
TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
# Alternatives offered in top_logprobs after the reply's own first token (answer-like tokens).
ALTERNATIVES = ["A", "B", "C", "D", "E", "1", "2", "3", "4", "5", "Yes", "No", "The", "I"]
MAX_HEADER = 64 * 1024
_READER: contextvars.ContextVar = contextvars.ContextVar("reader")   # the connection a handler serves
# Whole-server faults, for `--mode` and srv.fail(**MODES[name]).
MODES: dict[str, dict[str, Any]] = {
    "hang": {"hang": math.inf},
    "500": {"status": 500, "message": "internal error"},
    "no-choices": {"body": {"id": "x", "object": "chat.completion", "choices": []}},
    "null-content": {"body": {"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}]}},
    # hostile replies: the normal answer, edited (EDITS below)
    "nan-logprob": {"edit": "nan-logprob"},
    "inf-logprob": {"edit": "inf-logprob"},
    "huge-logprob": {"edit": "huge-logprob"},
    "object-finish": {"edit": "object-finish"},
    "surrogate": {"edit": "surrogate"},
    "key-echo": {"edit": "key-echo"},
    "gzip-bomb": {"edit": "gzip-bomb"},
    "429-forever": {"status": 429, "retry_after": 10 * 365 * 86400, "message": "come back in ten years"},
}
HOSTILE = ["nan-logprob", "inf-logprob", "huge-logprob", "object-finish", "surrogate", "key-echo", "gzip-bomb",
           "429-forever"]
MAX_BODY = 16 * 1024 * 1024
BOMB_BYTES = 256 * 1024 * 1024     # what the gzip bomb inflates to (about 256 KB on the wire)


def tokenize(text: str) -> list[str]:
    """Word-ish tokens that keep their leading whitespace (like BPE's ' A')."""
    return TOKEN_RE.findall(text)


def token_logprob(token: str, favoured: str | None) -> float:
    """ln 0.5 for the favoured token (the reply's first token), else a fixed value in [-5, -1]."""
    if favoured is not None and token.strip() == favoured.strip():
        return math.log(0.5)
    return -(1.0 + (zlib.crc32(token.encode("utf-8")) % 1000) / 250.0)


def top_alternatives(first: str, k: int) -> list[tuple[str, float]]:
    """The reply's first token at p=0.5, then the alternatives at 0.25, 0.125, ... (sum < 1)."""
    out = [(first, math.log(0.5))]
    p = 0.25
    for alt in ALTERNATIVES:
        if alt == first.strip():
            continue
        out.append((alt, math.log(p)))
        p /= 2
    return out[: max(0, k)]


@dataclass
class Fault:
    """What to do instead of a normal answer. status=None with hang>0: answer late; hang=inf:
    never answer (the connection stays open); `body`: answer 200 with this JSON instead."""

    status: int | None = None
    retry_after: float | str | None = None  # seconds, sent as Retry-After (a str: sent as it is)
    hang: float = 0.0                      # seconds to wait before answering
    message: str = "injected fault"
    body: Any = None
    edit: str | None = None                # a name in EDITS: the normal answer, made hostile
    headers: dict[str, str] | None = None  # more response headers of a status fault (retry-after-ms)


@dataclass
class _Rule:
    fault: Fault
    times: int | None                      # how many more requests it hits; None: unlimited
    on: set[int] | None                    # request numbers (1-based) it hits
    when: Callable[[str, dict], bool] | None


@dataclass
class Stats:
    requests: int = 0                      # requests received (all paths)
    in_flight: int = 0
    max_in_flight: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    # one dict per request: n, t (time.monotonic() at arrival), path, status, model, body
    arrivals: list[dict[str, Any]] = field(default_factory=list)
    keys_seen: set[str] = field(default_factory=set)   # bearer tokens presented

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                "by_status": {str(k): v for k, v in self.by_status.items()},
                "arrivals": [{k: v for k, v in a.items() if k != "body"} for a in self.arrivals]}


class FakeServer:
    """The server runs on its own asyncio loop in a background thread; use it as a context manager."""

    def __init__(self, *, delay: float = 0.0, reply: str | Callable[[dict], str] | None = None,
                 models: list[str] | None = None, port: int = 0, chat_template: str | None = None,
                 bos_token: str = "", eos_token: str = ""):
        self.delay = float(delay)
        self.chat_template, self.bos_token, self.eos_token = chat_template, bos_token, eos_token
        self.reply = reply
        self.models = list(models or ["test-model"])
        self.port = int(port)
        self.stats = Stats()
        self._rules: list[_Rule] = []
        self._rules_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- control (any thread) ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def fail(self, status: int | None = None, *, retry_after: float | str | None = None, hang: float = 0.0,
             times: int | None = None, on: list[int] | None = None,
             when: Callable[[str, dict], bool] | None = None, message: str = "injected fault",
             body: Any = None, edit: str | None = None, headers: dict[str, str] | None = None) -> None:
        """Add a fault rule. `times`: the next N matching requests; `on`: these request numbers
        (1-based, counted since start or reset); `when(path, body)`: requests it matches.
        Without any of them the rule hits every request. The first matching rule wins."""
        if edit is not None and edit not in EDITS:
            raise ValueError(f"no edit {edit!r}; one of {sorted(EDITS)}")
        rule = _Rule(Fault(status, retry_after, hang, message, body, edit, headers), times, set(on) if on else None,
                     when)
        with self._rules_lock:
            self._rules.append(rule)

    def clear_faults(self) -> None:
        with self._rules_lock:
            self._rules.clear()

    def reset(self) -> None:
        """Zero the counters (request numbers start again at 1) and drop the fault rules."""
        self.clear_faults()
        self.stats = Stats()

    def start(self) -> "FakeServer":
        self._thread = threading.Thread(target=self._serve, name="fake-openai-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"fake server did not start: {self._error}")
        if not self._ready.is_set():
            raise RuntimeError("fake server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- loop thread ------------------------------------------------------------------------
    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(
                self._connection, HOST, self.port, backlog=2048, limit=MAX_HEADER))
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        _READER.set(reader)
        self._conns.add(task)
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    break
                method, path, headers, body = req
                status, extra, payload = await self._handle(method, path, headers, body)
                keep = headers.get("connection", "").lower() != "close"
                _write_response(writer, status, payload, extra, keep)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except _BadRequest as exc:
            try:
                _write_response(writer, 400, _error_body(str(exc), "invalid_request_error"), {}, False)
                await writer.drain()
            except ConnectionError:
                pass
        finally:
            self._conns.discard(task)
            writer.close()

    async def _handle(self, method: str, path: str, headers: dict, raw: bytes):
        st = self.stats
        if path.rstrip("/") == "/_fake/stats":
            return 200, {}, st.as_dict()
        if path.rstrip("/") == "/_fake/reset" and method == "POST":
            self.reset()
            return 200, {}, {"reset": True}
        st.requests += 1
        n = st.requests
        st.in_flight += 1
        st.max_in_flight = max(st.max_in_flight, st.in_flight)
        arrival = {"n": n, "t": time.monotonic(), "path": path, "status": None, "model": None,
                   "body": None}
        st.arrivals.append(arrival)
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            st.keys_seen.add(auth[7:])
        try:
            status, extra, payload = await self._answer(method, path, raw, n, arrival, auth[7:])
        finally:
            st.in_flight -= 1
        arrival["status"] = status
        st.by_status[status] = st.by_status.get(status, 0) + 1
        return status, extra, payload

    def _fault_for(self, n: int, path: str, body: dict) -> Fault | None:
        with self._rules_lock:
            for rule in self._rules:
                if rule.times is not None and rule.times <= 0:
                    continue
                if rule.on is not None and n not in rule.on:
                    continue
                if rule.when is not None and not rule.when(path, body):
                    continue
                if rule.times is not None:
                    rule.times -= 1
                return rule.fault
        return None

    async def _answer(self, method: str, path: str, raw: bytes, n: int, arrival: dict, key: str = ""):
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route == "/props":
            if self.chat_template is None:
                return 404, {}, _error_body("File Not Found", "not_found_error")
            return 200, {}, {"chat_template": self.chat_template, "bos_token": self.bos_token,
                             "eos_token": self.eos_token, "model_path": self.models[0]}
        if method == "GET" and route == "/v1/models":
            return 200, {}, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "rolebound-fake"} for m in self.models]}
        if method != "POST" or route not in ("/v1/chat/completions", "/v1/completions"):
            return 404, {}, _error_body(f"no route {method} {route}", "not_found_error")
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            return 400, {}, _error_body(f"bad JSON: {exc}", "invalid_request_error")
        arrival["model"], arrival["body"] = body.get("model"), body
        fault = self._fault_for(n, route, body)
        wait = self.delay + (fault.hang if fault else 0.0)
        if wait == math.inf:
            # a dead server: never answers, and the request counts as in flight until the
            # client gives up and closes the connection
            reader = _READER.get(None)
            while reader is None or await reader.read(1024):     # b"": the client closed it
                await asyncio.sleep(0 if reader else 0.05)
            return 499, {}, _error_body("client closed the connection", "server_error")
        if wait > 0:
            await asyncio.sleep(wait)
        if fault is not None and fault.body is not None:
            return fault.status or 200, {}, fault.body
        if fault is not None and fault.status is not None:
            extra = dict(fault.headers or {})
            if fault.retry_after is not None:
                ra = fault.retry_after
                extra["Retry-After"] = ra if isinstance(ra, str) else str(int(ra)) if ra == int(ra) else f"{ra:g}"
            kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(fault.status, "server_error")
            return fault.status, extra, _error_body(fault.message, kind)
        if body.get("stream"):
            return 400, {}, _error_body("the fake server does not stream", "invalid_request_error")
        if not body.get("model"):
            return 400, {}, _error_body("model is required", "invalid_request_error")
        try:
            answer = self._chat(body, n) if route == "/v1/chat/completions" else self._completions(body, n)
        except (KeyError, TypeError, ValueError) as exc:
            return 400, {}, _error_body(f"bad request: {exc}", "invalid_request_error")
        if fault is not None and fault.edit is not None:
            return 200, {}, EDITS[fault.edit](answer, key)
        return 200, {}, answer

    # -- answers ----------------------------------------------------------------------------
    def _reply_text(self, body: dict, default: str) -> str:
        if self.reply is None:
            return default
        return self.reply(body) if callable(self.reply) else str(self.reply)

    def _chat(self, body: dict, n: int) -> dict:
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("messages must be a non-empty list")
        if body.get("continue_final_message"):       # as vLLM checks it
            if body.get("add_generation_prompt", True):
                raise ValueError("continue_final_message and add_generation_prompt cannot both be true")
            if msgs[-1].get("role") != "assistant":
                raise ValueError("continue_final_message needs a final assistant message")
        last = next((m.get("content") or "" for m in reversed(msgs) if m.get("role") == "user"), "")
        tokens, finish = _cut(tokenize(self._reply_text(body, last)), body.get("max_tokens"), body.get("stop"))
        text = "".join(tokens)
        logprobs = None
        if body.get("logprobs"):
            k = int(body.get("top_logprobs") or 0)
            if not 0 <= k <= 20:
                raise ValueError("top_logprobs must be between 0 and 20")
            content = []
            for i, tok in enumerate(tokens):
                # the first token is the favoured one (p=0.5); later tokens get fixed values
                lp = math.log(0.5) if i == 0 else token_logprob(tok, None)
                alts = top_alternatives(tok, k) if i == 0 else [(tok, lp)][:k]
                content.append({"token": tok, "logprob": lp,
                                "bytes": list(tok.encode()),
                                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                                 for t, lp in alts]})
            logprobs = {"content": content}
        prompt_tokens = sum(len(tokenize(str(m.get("content") or ""))) for m in msgs)
        return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": finish, "logprobs": logprobs}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                          "total_tokens": prompt_tokens + len(tokens)}}

    def _completions(self, body: dict, n: int) -> dict:
        prompts = body["prompt"]
        if isinstance(prompts, str):
            prompts = [prompts]
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise ValueError("prompt must be a string or a list of strings")
        want = body.get("logprobs")
        choices, p_tok, c_tok = [], 0, 0
        for i, prompt in enumerate(prompts):
            reply_tokens = tokenize(self._reply_text(body, prompt))
            gen, finish = _cut(reply_tokens, body.get("max_tokens", 16), body.get("stop"))
            favoured = reply_tokens[0] if reply_tokens else None
            ptoks = tokenize(prompt)
            p_tok += len(ptoks)
            c_tok += len(gen)
            shown = (ptoks if body.get("echo") else []) + gen
            text = "".join(shown)
            lp = None
            if want is not None:
                k = int(want)
                if not 0 <= k <= 5:
                    raise ValueError("logprobs must be between 0 and 5")
                offsets, vals, tops, pos = [], [], [], 0
                for j, tok in enumerate(shown):
                    offsets.append(pos)
                    pos += len(tok)
                    # the first token of an echoed prompt has no context, hence no log-prob
                    first_echoed = body.get("echo") and j == 0
                    vals.append(None if first_echoed else token_logprob(tok, favoured))
                    tops.append(None if first_echoed else dict([(tok, token_logprob(tok, favoured))][:k]))
                lp = {"tokens": shown, "token_logprobs": vals, "top_logprobs": tops, "text_offset": offsets}
            choices.append({"index": i, "text": text, "finish_reason": finish, "logprobs": lp})
        return {"id": f"cmpl-fake-{n}", "object": "text_completion", "created": int(time.time()),
                "model": body["model"], "choices": choices,
                "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}}


def _cut(tokens: list[str], max_tokens: Any, stop: Any) -> tuple[list[str], str]:
    """Apply stop strings, then max_tokens, as a server would."""
    finish = "stop"
    if stop:
        stops = [stop] if isinstance(stop, str) else list(stop)
        text = "".join(tokens)
        cut = min((text.find(s) for s in stops if s and s in text), default=-1)
        if cut >= 0:
            tokens = tokenize(text[:cut])
    if max_tokens is not None and len(tokens) > int(max_tokens):
        tokens, finish = tokens[: int(max_tokens)], "length"
    return tokens, finish


# -- hostile edits of a normal answer: each returns the payload (a dict), or _Raw bytes to send as they are
@dataclass
class _Raw:
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _set_logprobs(answer: dict, value: Any) -> dict:
    """Every log-prob in the answer (chat's content/top_logprobs, completions' token_logprobs
    and top_logprobs) set to `value`."""
    for ch in answer.get("choices") or []:
        lp = ch.get("logprobs") or {}
        for tok in lp.get("content") or []:
            tok["logprob"] = value
            for alt in tok.get("top_logprobs") or []:
                alt["logprob"] = value
        if lp.get("token_logprobs") is not None:
            lp["token_logprobs"] = [None if v is None else value for v in lp["token_logprobs"]]
            lp["top_logprobs"] = [None if t is None else {k: value for k in t} for t in lp["top_logprobs"]]
    return answer


def _huge(answer: dict, key: str) -> _Raw:
    """1e999 as a JSON number: Python's json reads it as inf, and cannot write it back."""
    text = json.dumps(_set_logprobs(answer, "__huge__"))
    return _Raw(text.replace('"__huge__"', "1e999").encode("utf-8"))


def _texts(answer: dict, change: Callable[[str], str]) -> dict:
    for ch in answer.get("choices") or []:
        if isinstance(ch.get("message"), dict):
            ch["message"]["content"] = change(ch["message"].get("content") or "")
        if isinstance(ch.get("text"), str):
            ch["text"] = change(ch["text"])
    return answer


def _finish_object(answer: dict, key: str) -> dict:
    for ch in answer.get("choices") or []:
        ch["finish_reason"] = {"type": "stop", "detail": ch.get("finish_reason")}
    return answer


_BOMB: list[bytes] = []


def _gzip_bomb(answer: dict, key: str) -> _Raw:
    """A 200 whose gzip body is a valid JSON object BOMB_BYTES long once inflated."""
    if not _BOMB:
        z = zlib.compressobj(6, zlib.DEFLATED, 31)
        chunk = b"a" * (1 << 20)
        parts = [z.compress(b'{"padding": "')]
        parts += [z.compress(chunk) for _ in range(BOMB_BYTES >> 20)]
        parts += [z.compress(b'"}'), z.flush()]
        _BOMB.append(b"".join(parts))
    return _Raw(_BOMB[0], {"Content-Encoding": "gzip"})


EDITS: dict[str, Callable[[dict, str], Any]] = {
    "nan-logprob": lambda a, key: _set_logprobs(a, math.nan),          # json writes NaN
    "inf-logprob": lambda a, key: _set_logprobs(a, math.inf),          # json writes Infinity
    "huge-logprob": _huge,
    "object-finish": _finish_object,
    "surrogate": lambda a, key: _texts(a, lambda t: "B \ud800 " + t),  # a lone surrogate, escaped
    "key-echo": lambda a, key: _texts(a, lambda t: f"B (my key is {key})"),
    "gzip-bomb": _gzip_bomb,
    # not hostile: the normal answer compressed, as api.openai.com sends it
    "gzip": lambda a, key: _Raw(zlib.compress(json.dumps(a).encode(), wbits=31), {"Content-Encoding": "gzip"}),
    "deflate": lambda a, key: _Raw(zlib.compress(json.dumps(a).encode()), {"Content-Encoding": "deflate"}),
}


def _error_body(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _BadRequest(Exception):
    pass


REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 408: "Request Timeout",
           413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


async def _read_request(reader: asyncio.StreamReader):
    """One HTTP/1.1 request (Content-Length or chunked body); None when the client hung up."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest("request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise _BadRequest(f"bad request line {lines[0]!r}")
    method, path, _ = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
            if len(body) > MAX_BODY:
                raise _BadRequest("body too large")
        return method, path, headers, bytes(body)
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY:
        raise _BadRequest("body too large")
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


def _write_response(writer: asyncio.StreamWriter, status: int, payload: Any, extra: dict, keep: bool) -> None:
    if isinstance(payload, _Raw):
        data, extra = payload.data, {**extra, **payload.headers}
    else:
        data = json.dumps(payload).encode("utf-8")
    head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", f"Connection: {'keep-alive' if keep else 'close'}"]
    head += [f"{k}: {v}" for k, v in extra.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)


def main(argv: list[str] | None = None) -> None:
    """`python -m rolebound.testing.fake_server --delay 0.1`: prints the URL, serves until killed."""
    import argparse

    ap = argparse.ArgumentParser(description="OpenAI-compatible fake server on 127.0.0.1")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--reply", default=None, help="fixed reply text (default: echo)")
    ap.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    ap.add_argument("--chat-template", default=None, help="a Jinja file GET /props reports (default: 404)")
    ap.add_argument("--mode", choices=sorted(MODES), default=None,
                    help="a broken server: hang (never answers), 500 (errors to everything), "
                         "no-choices, null-content; or a hostile one: " + ", ".join(HOSTILE))
    args = ap.parse_args(argv)
    tpl = open(args.chat_template, encoding="utf-8").read() if args.chat_template else None
    srv = FakeServer(delay=args.delay, reply=args.reply, port=args.port, chat_template=tpl).start()
    if args.mode:
        srv.fail(**MODES[args.mode])
    print(srv.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
