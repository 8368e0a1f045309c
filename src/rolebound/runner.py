"""Runs a suite: concurrency, micro-batching for local engines, caching, resume, progress.

Every model call is a `Call` (ItemContext builds it for a strategy) that goes through
`Session.call`, which in order
1. returns the run's own earlier record for that call_id (resume: no call),
2. returns the shared SQLite cache's answer for the exact request (no call),
3. asks the backend, then writes the record (and caches the answer if it succeeded).
A failed call is recorded with its error and raises `CallFailed`, which ends that item only;
the next run with the same --out retries it. A reply that cannot be kept (a NaN log-prob, an
object for finish_reason, a lone surrogate: anything that would not be written as strict JSON
and read back) is a failed call, never cached; a cached answer that cannot be kept is asked
again. The backends' secrets (API keys) are masked in every record and cached answer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import math
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Sequence

from .errors import BackendError, EndpointError, InputError, RoleboundError, RunStopped
from .loop import STOP_GRACE_S, EngineStopped, StopState, make_progress, rate_from_now, signalled
from .models.base import Backend, GenRequest, GenResult, ScoreRequest, ScoreResult
from .records import INVALID, Decoding, Message, Reading, Record, RunManifest, Unkeepable, record_line
from .protocol import repeat_seed
from .store import MANIFEST, RECORDS, ResponseCache, RunDir
from .term import visible


class CallFailed(Exception):
    def __init__(self, record: Record):
        super().__init__(record.error)
        self.record = record


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def git_revision() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _resolve(fut: asyncio.Future, result) -> None:
    if not fut.done():
        fut.set_result(result)


# ------------------------------------------------------------------------------------------------
class Dispatcher:
    """Gathers single requests from many item tasks into batches for local engines.

    API backends (batching=False) get each request straight away; their own semaphore bounds
    the requests in flight.
    """

    def __init__(self, backend: Backend, max_pending: int = 512):
        self.backend = backend
        self.batching = getattr(backend, "batching", False)
        self.max_pending = max_pending
        self.pending: dict[tuple, list[tuple[Any, asyncio.Future]]] = {}
        self._worker: asyncio.Task | None = None

    async def generate(self, req: GenRequest, decoding: Decoding) -> GenResult:
        if not self.batching:
            return (await self.backend.generate([req], decoding))[0]
        return await self._enqueue(("gen", decoding.model_dump_json()), req)

    async def score(self, req: ScoreRequest) -> ScoreResult:
        if not self.batching:
            return (await self.backend.score([req]))[0]
        return await self._enqueue(("score", ""), req)

    async def _enqueue(self, key: tuple, req: Any):
        fut = asyncio.get_running_loop().create_future()
        self.pending.setdefault(key, []).append((req, fut))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self.pending:
            # Let every runnable item task reach its next call before we cut a batch.
            for _ in range(3):
                await asyncio.sleep(0)
            key = max(self.pending, key=lambda k: len(self.pending[k]))
            queue = self.pending[key]
            chunk, rest = queue[: self.max_pending], queue[self.max_pending:]
            if rest:
                self.pending[key] = rest
            else:
                del self.pending[key]
            reqs = [r for r, _ in chunk]
            kw = {}
            if getattr(self.backend, "streams", False):
                # the engine hands each answer over as its batch finishes (from its worker
                # thread), so records are written while later batches still run
                loop = asyncio.get_running_loop()
                kw["emit"] = lambda i, res, _c=chunk: loop.call_soon_threadsafe(_resolve, _c[i][1], res)
            try:
                if key[0] == "gen":
                    results = await self.backend.generate(reqs, Decoding.model_validate_json(key[1]), **kw)
                else:
                    results = await self.backend.score(reqs, **kw)
            except EngineStopped:
                for _, fut in chunk:        # the run is stopping: these calls get no answer
                    fut.cancel()
                continue
            except Exception as exc:  # noqa: BLE001 - a whole-batch failure becomes per-call errors
                cls = GenResult if key[0] == "gen" else ScoreResult
                results = [cls(error=f"{type(exc).__name__}: {exc}") for _ in reqs]
            for (_, fut), res in zip(chunk, results):
                if not fut.done():
                    fut.set_result(res)


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One model call as a strategy asks for it: what `Session.call` needs and the record keeps."""

    call_id: str
    item_id: str
    strategy: str
    stage: str
    kind: str                                   # "chat", "complete" or "score"
    request: GenRequest | ScoreRequest
    role: str = "model"
    repeat: int = 0
    parse: Callable[[str], Any] | None = None
    gold: Any = None
    check: Callable[[Any, Any], bool | None] | None = None
    meta: dict | None = None
    decoding: Decoding | None = None            # None: the session's (the judge's for other roles)


@dataclass
class Counts:
    calls: int = 0          # replies from a backend (each one is recorded; a call cut off by a stop is not)
    cache_hits: int = 0
    resumed: int = 0        # answered from this run's own records
    errors: int = 0
    items_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_role: dict[str, int] = field(default_factory=dict)


class Session:
    """One run directory, its backends and the bookkeeping of calls."""

    def __init__(self, run_dir: RunDir, suite_name: str, backend: Backend, decoding: Decoding, *,
                 judge: Backend | None = None, cache: ResponseCache | None = None,
                 use_cache: bool = True, judge_decoding: Decoding | None = None,
                 extractor: Backend | None = None, completed: dict[str, Record] | None = None):
        self.run_dir = run_dir
        self.suite_name = suite_name
        self.backend = backend
        self.judge = judge
        self.extractor = extractor               # model-based answer extraction (scoring.model_extract)
        self.decoding = decoding
        self.judge_decoding = judge_decoding     # calls not made by the model under test
        self.cache = cache if use_cache else None
        self.completed = completed if completed is not None else run_dir.completed()
        self._earlier, self._resumed = set(self.completed), set()    # records of earlier invocations
        self.dispatchers = {id(backend): Dispatcher(backend)}
        if judge is not None and id(judge) not in self.dispatchers:
            self.dispatchers[id(judge)] = Dispatcher(judge)
        if extractor is not None and id(extractor) not in self.dispatchers:
            self.dispatchers[id(extractor)] = Dispatcher(extractor)
        self.roles: dict[str, Backend] = {}      # other roles' backends (the dialogue's simulated user)
        self.counts = Counts()
        self.errors: list[str] = []
        self._failures_in_row: dict[int, int] = {}
        self.jobs_done = 0      # (item, strategy, repeat) jobs finished in this invocation, failed or not
        self._secrets: tuple[str, ...] = ()
        self._gather_secrets()
        self._bad_cache_warned = False
        self._loading: dict[int, asyncio.Future] = {}
        self.loaded_at: float | None = None     # when a local engine finished loading at a call (epoch s)

    async def _load(self, backend: Backend) -> None:
        """A local engine loads at the first call the response cache cannot answer, so a run whose
        every call is cached (resumed, or rebuilt from carried replies) needs neither its weights nor
        its engine. One load, shared by the calls waiting for it; a load that fails ends the run."""
        if not getattr(backend, "batching", False):
            return
        task = self._loading.get(id(backend))
        if task is None:
            task = self._loading[id(backend)] = asyncio.ensure_future(backend.prepare())
        try:
            await asyncio.shield(task)
        except RoleboundError:
            raise
        except Exception as exc:  # noqa: BLE001 - a loader's own error, as one line
            raise BackendError(f"{backend.spec}: the model did not load: {type(exc).__name__}: {exc}") from None
        if self.loaded_at is None:
            self.loaded_at = time.time()
            rate_from_now()          # the bars' rate and ETA leave the load out

    def _gather_secrets(self) -> None:
        found = set(self._secrets)
        for b in (self.backend, self.judge, self.extractor, *self.roles.values()):
            if b is not None:
                found.update(s for s in b.secrets() if s)
        # the longest first, so a key that contains another is masked whole
        self._secrets = tuple(sorted(found, key=len, reverse=True))

    def mask(self, text: str) -> str:
        """`text` with every backend secret (API key) replaced by ***."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def add_backend(self, role: str, backend: Backend) -> None:
        """Calls with this role go to `backend` (batched by its own dispatcher)."""
        self.roles[role] = backend
        self.dispatchers.setdefault(id(backend), Dispatcher(backend))
        self._gather_secrets()

    def backend_for(self, role: str) -> Backend:
        if role in self.roles:
            return self.roles[role]
        if role == "extractor" and self.extractor is not None:
            return self.extractor
        if role == "model" or self.judge is None:
            return self.backend
        return self.judge

    def cache_key(self, backend: Backend, kind: str, payload: dict, decoding: Decoding | None,
                  repeat: int) -> str:
        blob = {"id": backend.identity(), "kind": kind, "req": payload, "repeat": repeat,
                "decoding": decoding.model_dump() if decoding else None}
        return hashlib.sha256(json.dumps(blob, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    async def call(self, call: Call) -> Record:
        call_id, kind, request, role, repeat = call.call_id, call.kind, call.request, call.role, call.repeat
        if call_id in self.completed:
            if call_id in self._earlier and call_id not in self._resumed:
                # each earlier record counts once (a shared dialogue turn is read by many probes)
                self._resumed.add(call_id)
                self.counts.resumed += 1
            return self.completed[call_id]
        backend = self.backend_for(role)
        decoding = call.decoding or (self.judge_decoding if role != "model" and self.judge_decoding else self.decoding)
        if repeat:
            decoding = decoding.merged(seed=repeat_seed(decoding.seed, repeat))
        dec = decoding if kind != "score" else None
        key = self.cache_key(backend, kind, request.cache_payload(), dec, repeat)
        started = time.perf_counter()
        stopping = False
        cached = self._from_cache(key, kind, request) if self.cache else None
        if cached is not None:
            self.counts.cache_hits += 1
            result = cached
            latency = None
        else:
            await self._load(backend)
            started = time.perf_counter()       # a call's latency leaves out the model's load
            result, stopping = await self._ask(self.dispatchers[id(backend)], kind, request, decoding)
            self.counts.calls += 1
            self.counts.by_role[role] = self.counts.by_role.get(role, 0) + 1
            latency = round(time.perf_counter() - started, 4)
            result = self._checked(result, request)
            if self.cache and result.error is None:
                self._to_cache(key, result)
        how = dict(backend=backend, latency=latency, cached=cached is not None)
        rec = self._record(call, result, **how)
        if kind != "score":
            rec.seed = decoding.seed
        rec, line = self._keepable(rec, lambda why: self._record(call, type(result)(error=why), **how))
        self.run_dir.append(rec, line)
        if rec.error:
            self.counts.errors += 1
        if stopping:
            raise asyncio.CancelledError     # written; now the stop goes on
        if rec.error:
            if cached is None:
                self._stop_if_endpoint_down(backend, rec)
            raise CallFailed(rec)
        self._failures_in_row[id(backend)] = 0
        self.completed[call_id] = rec
        return rec

    # -- what is kept: checked, masked, strict JSON ---------------------------------------------
    def _checked(self, result: GenResult | ScoreResult, request) -> GenResult | ScoreResult:
        """The backend's result with secrets masked; a failed call if it cannot be kept."""
        if isinstance(result, GenResult):
            if isinstance(result.text, str):
                result.text = self.mask(result.text)
            if result.error is None and (why := result.problem()):
                return GenResult(error=self.mask(f"the reply cannot be kept: {why}"))
        elif result.error is None and (why := result.problem(len(request.continuations))):
            return ScoreResult(error=f"the reply cannot be kept: {why}")
        if isinstance(result.error, str):
            result.error = self.mask(result.error)
        return result

    def _to_cache(self, key: str, result: GenResult | ScoreResult) -> None:
        value = dict(result.__dict__)
        if isinstance(value.get("logprobs"), list):        # strict JSON has no -inf
            value["logprobs"] = [None if x == -math.inf else x for x in value["logprobs"]]
        try:
            self.cache.put(key, value)
        except ValueError:
            pass            # not strict JSON (a backend's `extra`): only costs the call next time

    def _from_cache(self, key: str, kind: str, request) -> GenResult | ScoreResult | None:
        """A cached answer; None if there is none or it cannot be kept (an older version cached
        it), said once per run: the call is made again and its answer replaces the entry."""
        value = self.cache.get(key)
        if value is None:
            return None
        why = None
        try:
            if kind == "score":
                lps = value.get("logprobs")
                if isinstance(lps, list):
                    value = {**value, "logprobs": [-math.inf if x is None else x for x in lps]}
                result = ScoreResult(**value)
                why = result.error or result.problem(len(request.continuations))
            else:
                result = GenResult(**value)
                why = result.error or result.problem() or \
                    (self._secrets and self.mask(result.text) != result.text and "it holds an API key")
        except TypeError as exc:
            why = str(exc)
        if not why:
            return result       # type: ignore[possibly-undefined]
        self.cache.hits -= 1
        self.cache.misses += 1
        if not self._bad_cache_warned:
            self._bad_cache_warned = True
            print(visible(f"warning: {self.cache.path}: a cached reply cannot be kept ({why}); such replies are "
                          "asked again and replaced", newlines=False), file=sys.stderr, flush=True)
        return None

    def _keepable(self, rec: Record, failed: Callable[[str], Record]) -> tuple[Record, str]:
        """(record, its line): masked, strict JSON that reads back. A record that cannot be
        written is replaced by failed(why), a failed call; if even that cannot be written, the
        request itself holds what cannot be kept: the item's data is at fault (exit 2)."""
        try:
            line = record_line(rec)
        except Unkeepable as exc:
            seed, rec = rec.seed, failed(self.mask(f"the reply cannot be kept: {exc}"))
            rec.seed = seed
            try:
                line = record_line(rec)
            except Unkeepable as again:
                raise InputError(f"item '{rec.item_id}' cannot be written to records.jsonl: {again}") from None
        if self._secrets:
            masked = self.mask(line)
            if masked != line:
                line, rec = masked, Record.model_validate_json(masked)
        return rec, line

    async def _ask(self, disp: Dispatcher, kind: str, request, decoding: Decoding) -> tuple[Any, bool]:
        """The backend's reply, and whether the run is stopping. A stop (a signal, another item's
        fatal error) cancels the item; a reply already in is still returned so that it is written,
        and after a stop signal so is one that comes within STOP_GRACE_S (no new request starts
        then: engine_calls.STOP; a second signal ends the wait)."""
        call = asyncio.ensure_future(disp.score(request) if kind == "score" else disp.generate(request, decoding))
        try:
            return await asyncio.shield(call), False
        except asyncio.CancelledError:
            if not call.done() and signalled():
                try:
                    await asyncio.wait([call], timeout=STOP_GRACE_S)
                except asyncio.CancelledError:
                    pass
            if call.done() and not call.cancelled() and call.exception() is None:
                return call.result(), True
            call.cancel()
            raise

    def _stop_if_endpoint_down(self, backend: Backend, rec: Record) -> None:
        """Fail fast: an error the backend calls fatal (401, unknown model, nothing listening)
        or `max_consecutive_failures` failed calls in a row end the run, instead of sending every
        remaining request to an endpoint that cannot answer."""
        fatal = getattr(backend, "fatal_error", None)
        if fatal:
            raise EndpointError(f"{backend.spec}: {fatal}")
        n = self._failures_in_row.get(id(backend), 0) + 1
        self._failures_in_row[id(backend)] = n
        limit = getattr(backend, "max_consecutive_failures", 0) or 0
        if limit and n >= limit:
            raise EndpointError(f"{backend.spec}: {n} calls failed in a row, the last with: {rec.error} "
                                "(backend option max_consecutive_failures sets how many)")

    def _record(self, call: Call, result: GenResult | ScoreResult, *, backend: Backend, latency: float | None,
                cached: bool) -> Record:
        kind, request, parse, gold, check = call.kind, call.request, call.parse, call.gold, call.check
        if request.messages:
            prompt: Any = [m.model_dump() for m in request.messages]
            if kind == "score" and request.assistant_prefix:
                prompt.append({"role": "assistant", "content": request.assistant_prefix})
        else:
            prompt = request.prompt if kind != "score" else (request.prompt or "") + request.assistant_prefix
        rec = Record(call_id=call.call_id, item_id=call.item_id, suite=self.suite_name, strategy=call.strategy,
                     stage=call.stage, role=call.role, repeat=call.repeat, kind=kind, model=backend.spec,
                     prompt=prompt, gold=gold, latency_s=latency, cached=cached, meta=call.meta or {},
                     time=now())
        if result.error:
            rec.error = result.error
            return rec
        if kind == "score":
            rec.continuations = list(request.continuations)
            rec.logprobs = [round(x, 5) for x in result.logprobs]
            top = max(result.logprobs)
            best = [i for i, x in enumerate(result.logprobs) if x == top]
            rec.response = request.continuations[best[0]]
            if len(best) > 1:
                # an exact tie is reported, not hidden behind option order (counted in metrics)
                rec.tied = [request.continuations[i] for i in best]
            rec.prompt_tokens = result.prompt_tokens
        else:
            rec.response = result.text
            rec.prompt_tokens, rec.completion_tokens = result.prompt_tokens, result.completion_tokens
            rec.finish_reason = result.finish_reason
        self.counts.prompt_tokens += rec.prompt_tokens or 0
        self.counts.completion_tokens += rec.completion_tokens or 0
        rec.parsed = parse(rec.response) if parse else rec.response
        if isinstance(rec.parsed, Reading):
            # scoring.choice readings: keep which rule read the answer, and how to read it again
            rec.meta = {**rec.meta, "extraction": rec.parsed.as_meta()}
            if spec := getattr(parse, "spec", None):
                rec.meta["extract"] = spec()
            if check is not None:
                rec.meta["checked"] = True
            rec.parsed = INVALID if rec.parsed.value is None else rec.parsed.value
        if check is not None:
            rec.correct = check(rec.parsed, gold)
        elif gold is not None:
            # an unparseable answer is wrong, never guessed
            rec.correct = rec.parsed != INVALID and rec.parsed == gold
        return rec


@dataclass
class ItemContext:
    """What a strategy sees: model calls bound to one item, strategy and repeat."""

    session: Session
    item_id: str
    strategy: str
    repeat: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> Backend:
        return self.session.backend

    @property
    def judge_backend(self) -> Backend | None:
        return self.session.judge

    def _id(self, stage: str) -> str:
        rid = f"{self.item_id}/{self.strategy}/{stage}"
        return rid + (f"#{self.repeat}" if self.repeat else "")

    def _meta(self, extra: dict | None) -> dict:
        return {**self.meta, **(extra or {})}

    def _call(self, stage: str, kind: str, request: GenRequest | ScoreRequest, *, role: str, parse, gold, check,
              meta: dict | None) -> Call:
        return Call(call_id=self._id(stage), item_id=self.item_id, strategy=self.strategy, stage=stage, kind=kind,
                    request=request, role=role, repeat=self.repeat, parse=parse, gold=gold, check=check,
                    meta=self._meta(meta))

    async def chat(self, stage: str, messages: Sequence[Message | dict], *, role: str = "model",
                   parse=None, gold=None, check=None, max_tokens: int | None = None,
                   stop: list[str] | None = None, meta: dict | None = None) -> Record:
        msgs = [m if isinstance(m, Message) else Message(**m) for m in messages]
        req = GenRequest(messages=msgs, max_tokens=max_tokens, stop=stop)
        return await self.session.call(self._call(stage, "chat", req, role=role, parse=parse, gold=gold,
                                                  check=check, meta=meta))

    async def complete(self, stage: str, prompt: str, *, role: str = "model", parse=None, gold=None,
                       check=None, max_tokens: int | None = None, stop: list[str] | None = None,
                       meta: dict | None = None) -> Record:
        req = GenRequest(prompt=prompt, max_tokens=max_tokens, stop=stop)
        return await self.session.call(self._call(stage, "complete", req, role=role, parse=parse, gold=gold,
                                                  check=check, meta=meta))

    async def score(self, stage: str, continuations: list[str], *, messages=None, prompt: str | None = None,
                    assistant_prefix: str = "", role: str = "model", parse=None, gold=None, check=None,
                    meta: dict | None = None) -> Record:
        msgs = [m if isinstance(m, Message) else Message(**m) for m in messages] if messages else None
        req = ScoreRequest(continuations=list(continuations), messages=msgs, prompt=prompt,
                           assistant_prefix=assistant_prefix)
        return await self.session.call(self._call(stage, "score", req, role=role, parse=parse, gold=gold,
                                                  check=check, meta=meta))



@contextmanager
def open_session(rd: RunDir, suite_name: str, backend: Backend, decoding: Decoding, *,
                 judge: Backend | None = None, use_cache: bool = True,
                 judge_decoding: Decoding | None = None, extractor: Backend | None = None,
                 on_locked: Callable[[], None] | None = None) -> Iterator[Session]:
    """A Session writing into `rd`: the directory is locked, `on_locked` runs (checks the folder
    holds the same run, or clears it for --overwrite: only ever under the lock), a torn last
    line left by a kill is cut, records.jsonl is opened for appending and the shared response
    cache opened; on the way out everything is flushed, closed and unlocked, whatever happened."""
    rd.lock()
    try:
        if on_locked is not None:
            on_locked()
        rd.repair()
        done = rd.completed()
        rd.open_for_append()
        cache = ResponseCache() if use_cache else None
        try:
            yield Session(rd, suite_name, backend, decoding, judge=judge, cache=cache, use_cache=use_cache,
                          judge_decoding=judge_decoding, extractor=extractor, completed=done)
        finally:
            rd.close()
            if cache:
                cache.close()
    finally:
        rd.unlock()

# ------------------------------------------------------------------------------------------------
def finish(rd: RunDir, manifest: RunManifest, session: Session, stopped: bool) -> None:
    """The end of an invocation (a run's or a judge-check's), its counts set: the manifest, finished
    unless stopped, and errors.log with this pass's failures (secrets masked); a clean pass removes
    the earlier pass's."""
    manifest.finished = None if stopped else now()
    rd.write_manifest(manifest)
    if session.errors:
        rd.write_text("errors.log", "\n".join(visible(session.mask(e), newlines=False) for e in session.errors) + "\n")
    elif not stopped:
        rd.remove("errors.log")


def manifest_key(m: RunManifest) -> dict[str, Any]:
    """Fields that must match for a run directory to be resumed."""
    return {"suite": m.suite, "model": m.model, "adapter": (m.adapter or {}).get("sha"),
            "strategies": sorted(m.strategies), "judge": m.judge,
            "scoring": m.scoring, "decoding": m.decoding.model_dump(),
            "judge_decoding": m.judge_decoding.model_dump() if m.judge_decoding else None,
            "dataset_hash": m.dataset_hash,
            "repeats": m.repeats, "limit": m.limit, "options": m.options}


def check_resumable(old: RunManifest, new: RunManifest, path: Path) -> None:
    a, b = manifest_key(old), manifest_key(new)
    diff = [k for k in a if a[k] != b[k]]
    if diff:
        k = diff[0]
        raise RoleboundError(
            f"{path} holds a different run ({k}: {a[k]!r} there, {b[k]!r} now); "
            "use another --out, or --overwrite to start it again")


@dataclass
class RunResult:
    run_dir: Path
    manifest: RunManifest
    counts: Counts
    metrics: dict[str, Any]
    report_paths: list[Path]
    errors: list[str]
    wall_s: float


@dataclass
class Plan:
    """What a run request resolves to before anything is written (api.run builds it)."""

    settings: Any                        # suites.base.RunSettings
    backend: Backend
    decoding: Decoding | None = None
    resolved: Any = None                 # protocol.Resolved
    judge: Backend | None = None
    self_judged: bool = False
    extractor: Backend | None = None
    concurrency: int = 1
    skipped: dict = field(default_factory=dict)   # default strategies this backend cannot run, and why
    # --extractor's pass over the rules' none answers, after the items (scoring.model_extract.extract_all)
    extract: Callable[..., Awaitable[Any]] | None = None


def execute(suite, plan: Plan, dataset, items: list, session: Session, *, sig: StopState | None = None,
            progress: bool = True, timing: dict | None = None, leave_nothing=lambda: False) -> RoleboundError | None:
    """Every (item, strategy, repeat) job of a run, with the suite's run-level work before and after;
    returns why the run stopped early (None: it did not). A stop signal cancels the calls
    (loop.stop_signals) and the caller writes what is done; a failed call or a bug stops its item
    only; a configuration error ends the run, and leaves no run folder if nothing was recorded."""
    sig = sig or StopState()
    timing = {} if timing is None else timing
    try:
        asyncio.run(_run(suite, plan, dataset, items, session, sig, progress, timing))
    except (asyncio.CancelledError, KeyboardInterrupt, EngineStopped):
        if sig.code is None:
            raise
        return signal_stop(sig.code)
    except EndpointError as exc:
        session.errors.append(f"run stopped: {exc}")
        return exc
    except (InputError, BackendError):
        # an option the suite rejects only once the run starts: if nothing was recorded, leave no
        # run folder behind, so the corrected command does not meet "a different run"
        if leave_nothing() and _empty(session.run_dir.records_path):
            for name in (MANIFEST, RECORDS):
                session.run_dir.remove(name)
        raise
    return signal_stop(sig.code) if sig.code is not None else None


def signal_stop(code: int) -> RunStopped:
    return RunStopped("terminated" if code == 143 else "interrupted", exit_code=code)


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


async def _run(suite, plan: Plan, dataset, items: list, session: Session, sig: StopState, progress: bool,
               timing: dict) -> None:
    settings, backend, extractor = plan.settings, plan.backend, plan.extractor
    others = [b for b in (plan.judge, extractor) if b is not None and b is not backend]
    others = [b for k, b in enumerate(others) if b not in others[:k]]
    sig.watch()          # from here a stop signal cancels this task
    try:
        # Local engines (batching) load at the first call the cache cannot answer (Session._load):
        # a run whose every call is cached never loads one. Others prepare here.
        for b in [backend] + others:
            if not getattr(b, "batching", False):
                await b.prepare()
        timing["loaded"] = time.time()
        settings.state.progress = progress     # run-level work (after_items) shows a bar like the items
        await suite.before_items(session, dataset, items, settings)
        jobs = [(item, strategy, rep) for strategy in settings.strategies for rep in range(settings.repeats)
                for item in items]

        async def one(job):
            item, strategy, rep = job
            try:
                await suite.run_item(item, ItemContext(session=session, item_id=item.id, strategy=strategy,
                                                       repeat=rep), strategy, settings)
            except CallFailed as exc:
                session.counts.items_failed += 1
                session.errors.append(f"{exc.record.call_id}: {exc.record.error}")
            except RoleboundError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug in one item must not end the run
                session.counts.items_failed += 1
                session.errors.append(f"{item.id}/{strategy}: {type(exc).__name__}: {exc}")
            session.jobs_done += 1

        # several strategies or repeats: the bar counts item x strategy x repeat jobs, and says so
        per = [f"{len(settings.strategies)} strategies"] if len(settings.strategies) > 1 else []
        per += [f"{settings.repeats} repeats"] if settings.repeats > 1 else []
        unit, note = ("jobs", f" ({len(items)} items x {' x '.join(per)})") if per else ("items", "")
        await bounded(jobs, one, concurrency=plan.concurrency, label=suite.name, progress=progress, unit=unit,
                      note=note)
        timing["items_done"] = time.time()
        timing["loaded"] = max(timing["loaded"], session.loaded_at or 0.0)   # a load within the items
        await suite.after_items(session, dataset, settings)
        if plan.extract is not None:
            await plan.extract(session, progress=progress)
    finally:
        sig.unwatch()
        await backend.close()
        for b in others:
            await b.close()


async def bounded(jobs: Sequence[Any], fn: Callable[[Any], Awaitable[Any]], *, concurrency: int,
                  label: str = "", progress: bool = False, unit: str = "items",
                  note: str = "") -> list[Any]:
    """The one bounded call loop of runs, re-judging and builds: `await fn(job)` for every job, at
    most `concurrency` at a time, one progress bar (rate and ETA); the results in the jobs' order.
    An exception out of `fn` (fn handles the ones it expects) or Ctrl-C cancels the jobs still waiting."""
    sem = asyncio.Semaphore(max(1, concurrency))
    prog, task = make_progress(len(jobs), label, enabled=progress, unit=unit, note=note)

    async def one(job):
        async with sem:
            result = await fn(job)
        if prog:     # a finished job only: jobs cancelled by Ctrl-C are not counted as done
            prog.advance(task)
        return result

    tasks = []
    for j in jobs:
        tasks.append(asyncio.create_task(one(j)))
    try:
        if prog:
            prog.start()
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            if not t.cancelling():      # one cancel each: a job given STOP_GRACE_S keeps it
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if prog:
            prog.stop()
