"""A suite's own strategies, prompts and answer readers, run against inspect_ai's model.

Each inspect sample is one (item, strategy) job. Its calls go through rolebound's Session, as in a
native run (same call ids, same records: stage, parsed answer, gold, the rule that read it), into
an in-memory run folder; the backend behind the Session is the eval's model (`--model`), and the
judge is the `grader` model role (`--model-role grader=...`; the eval's model when not given).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendError
from ..models import INSPECT_HINT

try:
    from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model,
                                  ModelName, get_model)
    from inspect_ai.model._generate_config import active_generate_config
    from inspect_ai.model._model import active_model
except ImportError:
    raise BackendError(INSPECT_HINT) from None

from . import GRADER, STORE_KEY
from ..models.base import CHAT, Backend, GenRequest, GenResult
from ..records import Decoding, Message, Record
from ..runner import CallFailed, ItemContext, Session



class InspectBackend(Backend):
    """rolebound's backend protocol over an inspect Model (chat only: no log-likelihoods)."""

    backend = "inspect"
    capabilities = frozenset({CHAT})

    def __init__(self, name: str = "model", decoding: Decoding | None = None, *, model: Model | None = None,
                 **options: Any):
        super().__init__(str(ModelName(model)) if model is not None else name, decoding, **options)
        self.model = model

    async def prepare(self) -> None:
        if self.model is None:
            raise BackendError(f"{self.spec} runs only inside `inspect eval rolebound/SUITE` (docs/inspect.md)")

    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        return [await self._one(r, decoding) for r in requests]

    async def _one(self, req: GenRequest, decoding: Decoding) -> GenResult:
        kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant, "system": ChatMessageSystem}
        msgs = ([kinds[m.role](content=m.content) for m in req.messages] if req.messages
                else [ChatMessageUser(content=req.prompt or "")])
        config = GenerateConfig(temperature=decoding.temperature, top_p=decoding.top_p,
                                max_tokens=req.max_tokens or decoding.max_tokens, seed=decoding.seed,
                                stop_seqs=req.stop or decoding.stop)
        if self.model is active_model():      # the eval's --temperature, --max-tokens ... win over the protocol
            config = config.merge(active_generate_config())
        try:
            out = await self.model.generate(msgs, config=config)
        except Exception as exc:  # noqa: BLE001 - recorded on the call, as a native run records it
            return GenResult(error=f"{type(exc).__name__}: {exc}")
        if out.error:
            return GenResult(error=out.error)
        usage = out.usage
        return GenResult(text=out.completion, finish_reason=out.stop_reason,
                         prompt_tokens=usage.input_tokens if usage else None,
                         completion_tokens=usage.output_tokens if usage else None)


class _Asked(Exception):
    """The probe's first call: the strategy asks something of the item."""


class ProbeBackend(InspectBackend):
    """Stops a strategy at its first call, to learn whether it asks anything of an item."""

    async def generate(self, requests, decoding):
        raise _Asked


def asked(suite, pairs: list[tuple[Any, str]], settings) -> list[bool]:
    """For each (item, strategy): does the suite's strategy make a call for it (CHARM's sequential
    asks nothing of a BA item)? Found by running the strategy up to its first call, on its own
    event loop (a task may be built inside inspect's). Anything else it raises counts as asking."""
    import concurrent.futures

    async def one(item, strategy) -> bool:
        session = Session(MemoryRunDir(), suite.name, ProbeBackend(), Decoding(), use_cache=False)
        try:
            await suite.run_item(item, ItemContext(session=session, item_id=item.id, strategy=strategy),
                                 strategy, settings)
        except Exception:  # noqa: BLE001 - _Asked, or a failure the real job will record
            return True
        return False

    async def every() -> list[bool]:
        return [await one(i, s) for i, s in pairs]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, every()).result()


class MemoryRunDir:
    """What a Session needs of a run folder, kept in memory for one sample."""

    path: Path | None = None

    def __init__(self) -> None:
        self.records: list[Record] = []

    def completed(self) -> dict[str, Record]:
        return {}

    def append(self, rec: Record, line: str | None = None) -> None:
        self.records.append(rec)        # the Session has checked it (masked, strict JSON): kept as is


def decodings(suite) -> tuple[Decoding, Decoding | None]:
    """The paper's decoding for answers and judge calls (the suite's protocol), as a native paper run."""
    p = suite.protocol
    answers = Decoding(**(p.decoding if p else {}))
    judge = answers.merged(**p.judge_decoding) if p and p.judge_decoding else None
    return answers, judge


class Prepared:
    """The suite's run-level preparation (before_items: CHARM's distractor similarity, multiverse's
    embedder), done once per task, before its first job."""

    def __init__(self, suite, dataset, items, settings):
        self.suite, self.dataset, self.items, self.settings = suite, dataset, items, settings
        self.done = False
        self.lock: asyncio.Lock | None = None

    async def ensure(self, session: Session) -> None:
        if self.done:
            return
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:
            if not self.done:
                await self.suite.before_items(session, self.dataset, self.items, self.settings)
                self.done = True


async def run_job(suite, item, strategy: str, settings, prepared: Prepared | None = None) -> list[Record]:
    """One (item, strategy) job against the eval's model; its records, failed calls included."""
    backend = InspectBackend(model=get_model())
    grader = InspectBackend(model=get_model(role=GRADER, default=get_model()))
    answers, judge_decoding = decodings(suite)
    rd = MemoryRunDir()
    session = Session(rd, suite.name, backend, answers, judge=grader if suite.uses_judge else None,
                      use_cache=False, judge_decoding=judge_decoding)
    if prepared is not None:
        await prepared.ensure(session)
    ctx = ItemContext(session=session, item_id=item.id, strategy=strategy)
    try:
        await suite.run_item(item, ctx, strategy, settings)
    except CallFailed:
        pass                      # the failed call is in rd.records with its error
    return rd.records


def transcript(records: list[Record]) -> list[Any]:
    """The model's conversation of the job, for `inspect view`: each call's last prompt turn and reply."""
    kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant, "system": ChatMessageSystem}
    out: list[Any] = []
    for r in records:
        if isinstance(r.prompt, list) and r.prompt:
            last = r.prompt[-1]
            out.append(kinds.get(last.get("role"), ChatMessageUser)(content=str(last.get("content") or "")))
        out.append(ChatMessageAssistant(content=r.response or (f"[error] {r.error}" if r.error else "")))
    return out


def score_value(records: list[Record]) -> float:
    """The share of the job's graded calls (gold or a judge's verdict) that are correct."""
    graded = [r.correct for r in records if r.correct is not None]
    return sum(bool(c) for c in graded) / len(graded) if graded else 0.0


def to_message(m: Message | dict) -> dict:
    return m.model_dump() if isinstance(m, Message) else dict(m)
