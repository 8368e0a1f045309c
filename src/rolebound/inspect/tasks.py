"""The four suites as inspect_ai tasks: `inspect eval rolebound/charm -T strategy=sequential`.

Task parameters: strategy (one or several, comma-separated; default: the suite's default
strategies a chat-only model can run), data (a --data value: a file, or hf:DIR for an export),
set (the suite's --set options, `key=value,key=value`) and limit (the balanced subset `rolebound run
--limit N` takes; inspect's own --limit takes the first samples). Each sample is one (item, strategy) job;
its score carries the job's rolebound records (stage, parsed answer, gold, the rule that read it),
which `rolebound import inspect LOG` turns back into a run folder.
"""

from __future__ import annotations

import re
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver

from ..records import VERSION
from ..suites.base import DIALOGUE
from ..errors import InputError, RoleboundError
from ..hub import load_data, task_name
from ..suites import get_suite
from ..term import clip, visible
from . import bridge, tokens

META_KEY = "rolebound"


def _sets(text: str | list | None) -> dict[str, Any]:
    out = {}
    parts = text if isinstance(text, list) else str(text or "").split(",")    # inspect's -T splits a,b
    for part in [str(p) for p in parts if str(p).strip()]:
        key, eq, value = part.partition("=")
        if not eq:
            raise InputError(f"expected key=value, not {part!r}", field="set")
        out[key.strip()] = value.strip()
    return out


def _strategies(suite, strategy: str | list | None) -> list[str]:
    if strategy:
        names = strategy if isinstance(strategy, list) else str(strategy).split(",")
        names = [n.strip() for n in names if n.strip()]
        if DIALOGUE in names:       # its simulated user and context budget are run-level machinery
            raise InputError(f"the {DIALOGUE} strategy runs only in `rolebound run`", field="strategy")
        bad = [n for n in names if n not in suite.strategies]
        if bad:
            raise InputError(f"unknown strategy '{bad[0]}' for suite {suite.name}; "
                             f"valid: {', '.join(suite.strategies)}", field="strategy")
        return names
    stub = bridge.InspectBackend()
    skip = suite.unavailable_strategies(stub, suite.default_strategies)
    return [s for s in suite.default_strategies if s not in skip and s != DIALOGUE]


def _text(item) -> str:
    """What the sample shows as its input in `inspect view` (the calls' prompts are in its messages)."""
    for key in ("question", "query", "situation", "event"):
        if isinstance(value := getattr(item, key, None), str) and value:
            return value
    return item.id


def _limit(limit: Any) -> int | None:
    """-T limit=N: a whole number of items, 1 or more (inspect passes -T values parsed as YAML)."""
    if limit is None or limit == "":
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, str)) or \
            not re.fullmatch(r"[+-]?[0-9]{1,18}", str(limit).strip()):
        raise InputError(f"expected a whole number of items, got {clip(repr(limit))}", field="limit")
    if int(limit) < 1:
        raise InputError(f"must be 1 or more, got {int(limit)}", field="limit")
    return int(limit)


def _shown(exc: RoleboundError) -> Exception:
    """The same error, also a PrerequisiteError: inspect's CLI prints its message as one line, with
    no traceback (it prints a traceback for any other exception a task raises)."""
    try:
        from inspect_ai._util.error import PrerequisiteError
    except ImportError:
        return exc
    cls = type(type(exc).__name__, (type(exc), PrerequisiteError), {})
    new = cls.__new__(cls)
    Exception.__init__(new, *exc.args)
    new.__dict__.update(exc.__dict__, message="error: " + visible(exc, newlines=False))
    return new


def build(suite_name: str, strategy: str | None, data: str | None, set: str | None, limit: Any) -> Task:
    try:
        return _build(suite_name, strategy, data, set, _limit(limit))
    except RoleboundError as exc:
        raise _shown(exc) from None


def _build(suite_name: str, strategy: str | None, data: str | None, set: str | None, limit: int | None) -> Task:
    tokens.seed()       # inspect's mockllm counts tokens with o200k_base: offline, from our wheel
    suite = get_suite(suite_name)
    options = _sets(set)
    strategies = _strategies(suite, strategy)
    settings = suite.run_settings(strategies, options, scoring="generate" if suite.offers_scoring else None,
                                  backend="inspect", judge_requested=suite.uses_judge)
    settings.partial = True     # inspect's --limit may run a few of the items: per-item work on first use
    stub = bridge.InspectBackend()
    dataset = load_data(suite, data, settings)
    suite.check(stub, settings, judge=stub if suite.uses_judge else None)
    items = suite.select(dataset.items, limit, settings)
    by_id = {i.id: i for i in items}
    pairs = [(i, s) for s in strategies for i in items]
    # only the jobs that ask something: CHARM's sequential asks nothing of a BA item
    samples = [Sample(id=f"{i.id}/{s}", input=_text(i), metadata={"item_id": i.id, "strategy": s})
               for (i, s), asks in zip(pairs, bridge.asked(suite, pairs, settings)) if asks]
    answers, judge_decoding = bridge.decodings(suite)
    from ..api import _template_hashes

    meta = {"suite": suite.name, "strategies": strategies, "scoring": settings.scoring,
            "options": settings.options.given(), "dataset": dataset.source, "dataset_hash": dataset.hash,
            "n_items": len(items), "limit": limit, "decoding": answers.model_dump(),
            # a log of the first samples (inspect's --limit) is told from a whole run by these
            "asked_items": len({s.metadata["item_id"] for s in samples}), "dataset_items": len(dataset.items),
            "judge_decoding": judge_decoding.model_dump() if judge_decoding else None,
            "uses_judge": suite.uses_judge, "prompt_templates": _template_hashes(suite),
            "package_version": VERSION}
    # the solver's parameters go into the log's plan: it gets a key, not the items
    key = f"{suite.name}:{len(_JOBS)}"
    _JOBS[key] = (suite, by_id, settings, bridge.Prepared(suite, dataset, items, settings))
    return Task(dataset=MemoryDataset(samples, name=suite.name), solver=run_suite(key),
                scorer=rolebound_score(), metadata={META_KEY: meta}, name=task_name(suite.name))


_JOBS: dict[str, tuple] = {}      # key -> (suite, items by id, settings, run-level preparation)


@solver
def run_suite(key: str):
    """The suite's own strategy for the sample's item, its calls made with the eval's model."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        suite, by_id, settings, prepared = _JOBS[key]
        item = by_id[state.metadata["item_id"]]
        records = await bridge.run_job(suite, item, state.metadata["strategy"], settings, prepared)
        state.messages = bridge.transcript([r for r in records if r.role == "model"]) or state.messages
        failed = [r for r in records if r.error]
        if failed:      # a sample error: `inspect eval-retry` asks the job again
            raise RuntimeError(f"{failed[0].call_id}: {failed[0].error}")
        state.store.set(bridge.STORE_KEY, [r.model_dump(mode="json") for r in records])
        return state

    return solve


@scorer(metrics=[accuracy(), stderr()])
def rolebound_score():
    """The share of the job's graded calls that are correct; metadata: the job's records."""

    async def score(state: TaskState, target: Target) -> Score:
        from ..records import Record

        dumped = state.store.get(bridge.STORE_KEY) or []
        records = [Record.model_validate(r) for r in dumped]
        answers = [f"{r.stage}={r.parsed}" for r in records if r.role == "model"]
        return Score(value=bridge.score_value(records), answer="; ".join(answers) or None,
                     metadata={"records": dumped})

    return score


@task
def charm(strategy: str | None = None, data: str | None = None, set: str | None = None,
          limit: int | None = None) -> Task:
    """CHARM: temporal and cross-universe knowledge boundaries (BA, BC, KV)."""
    return build("charm", strategy, data, set, limit)


@task
def knowledge_errors(strategy: str | None = None, data: str | None = None, set: str | None = None,
          limit: int | None = None) -> Task:
    """Character knowledge errors (KKE/UKE), judged by the `grader` model role."""
    return build("knowledge-errors", strategy, data, set, limit)


@task
def multiverse(strategy: str | None = None, data: str | None = None, set: str | None = None,
          limit: int | None = None) -> Task:
    """Beyond One World: canon events and moral dilemmas of superhero versions."""
    return build("multiverse", strategy, data, set, limit)


@task
def capability(strategy: str | None = None, data: str | None = None, set: str | None = None,
          limit: int | None = None) -> Task:
    """Role-capability leakage (RoleCapBench), judged by the `grader` model role."""
    return build("capability", strategy, data, set, limit)
