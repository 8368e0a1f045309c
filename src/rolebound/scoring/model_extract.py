"""Model-based answer extraction (optional, `--extractor BACKEND:NAME`): a second reading of the
replies the rules leave as none.

Only an answer whose rule reading is none goes to the extractor model, with a short fixed prompt
(the options and the reply; it must answer with one option label or NONE). Its readings are
records of their own (role "extractor", stage "extract.<stage>", call id
"<call>/extract/<extractor>") made through Session.call, so they are cached and resumed like any
call. The suite's metrics never see them: report.build computes the paper-protocol figures
without them and, apart, the same figures with the extractor's readings put in place of the
rules' none (metrics["model_extraction"], a separate table in the report).

Suites opt in through Suite.model_extraction_candidates (charm and multiverse return `rule_none`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ..records import EXTRACTOR, Decoding, INVALID, Message, Reading, Record
from .extract import Extractor

STAGE = "extract"
# kinds of rule reading a model may read again: an option or a Yes/No (judge lines are not); a
# suite's own kind (extract.register_kind) qualifies where its extractor carries options
KINDS = ("choice", "yes_no", "yes_no_strict")
# greedy and short: the answer is one label
DECODING = Decoding(temperature=0.0, top_p=1.0, max_tokens=16, seed=0)

CHOICE_PROMPT = (
    "Below is a reply to a multiple-choice question. Which one option does the reply commit to as its "
    "final answer?\n"
    "Answer with the option's label only ({labels}), or NONE if the reply refuses, picks more than one "
    "option, proposes an answer of its own, is cut off before deciding, or is unclear.\n\n"
    "Options:\n{options}\n\nReply:\n<<<\n{reply}\n>>>")
YES_NO_PROMPT = (
    "Below is a reply to a yes/no question. Does the reply answer Yes or No?\n"
    "Answer with Yes or No only, or NONE if the reply gives no clear verdict.\n\n"
    "{question}Reply:\n<<<\n{reply}\n>>>")


def rule_none(records: Iterable[Record]) -> list[Record]:
    """Answers of the model under test that the rules read as none (the default opt-in)."""
    out = []
    for r in records:
        spec = (r.meta or {}).get("extract") or {}
        if r.role == "model" and r.error is None and r.kind != "score" and r.parsed == INVALID \
                and (spec.get("kind") in KINDS or spec.get("options")) and (r.response or "").strip():
            out.append(r)
    return out


def _labels(ex: Extractor) -> list[str]:
    if ex.kind in ("yes_no", "yes_no_strict"):
        return ["Yes", "No"]
    return [str(label).strip() for label, _ in ex.options]


def prompt(ex: Extractor, reply: str) -> str:
    """The fixed prompt for one reply."""
    if ex.kind in ("yes_no", "yes_no_strict"):
        q = f"Question: {ex.question}\n\n" if ex.question else ""
        return YES_NO_PROMPT.format(question=q, reply=reply.strip())
    labels = _labels(ex)
    opts = "\n".join(f"{label}) {text}" if text else f"{label})" for label, (_, text) in zip(labels, ex.options))
    return CHOICE_PROMPT.format(labels=", ".join(labels), options=opts, reply=reply.strip())


_WRAP = re.compile(r"[*_`\"'“”‘’]")
_LEAD = re.compile(r"^(?:(?:final\s+)?answer\s*[:：]\s*)?(?:(?:option|choice)\s+)?", re.I)


def read_label(text: str | None, ex: Extractor) -> Reading:
    """The extractor's reply held to the format: exactly one label (or NONE) and nothing else;
    anything else reads as none, never as a guess."""
    t = _WRAP.sub("", text or "").strip()
    t = _LEAD.sub("", t).strip().strip("()[].:;,!").strip()
    if not t:
        return Reading(None, "none:extractor_empty")
    if t.casefold() == "none":
        return Reading(None, "none:extractor_none", t)
    labels = _labels(ex)
    hits = [i for i, label in enumerate(labels) if label.casefold() == t.casefold()]
    if len(hits) != 1:
        return Reading(None, "none:extractor_not_a_label", t[:160])
    i = hits[0]
    if ex.kind in ("yes_no", "yes_no_strict"):
        return Reading(labels[i], "extractor_label", t)
    value = {"index": i, "number": i + 1, "label": ex.options[i][0]}[ex.form]
    return Reading(value, "extractor_label", t)


def call_id(source: Record, spec: str) -> str:
    return f"{source.call_id}/{STAGE}/{spec}"


async def extract_all(suite, session, spec: str, *, concurrency: int = 16, progress: bool = True) -> int:
    """Ask the extractor about every candidate of the suite; returns how many were asked (resumed
    and cached ones included: Session.call makes no call for them)."""
    from ..runner import bounded
    from ..models.base import GenRequest
    from ..runner import Call, CallFailed

    todo = suite.model_extraction_candidates(list(session.completed.values()))
    if not todo:
        return 0

    async def one(rec: Record) -> None:
        ex = Extractor.from_spec(rec.meta["extract"])
        req = GenRequest(messages=[Message(role="user", content=prompt(ex, rec.response or ""))],
                         max_tokens=DECODING.max_tokens)
        try:
            await session.call(Call(call_id=call_id(rec, spec), item_id=rec.item_id, strategy=rec.strategy,
                                    stage=f"{STAGE}.{rec.stage}", kind="chat", request=req, role=EXTRACTOR,
                                    repeat=rec.repeat, parse=lambda text, _ex=ex: read_label(text, _ex),
                                    decoding=DECODING,
                                    meta={"extracts": rec.call_id, "extractor": spec,
                                          "rule": (rec.meta.get("extraction") or {}).get("rule")}))
        except CallFailed as exc:       # kept in errors.log; the rule reading stands
            session.errors.append(f"{exc.record.call_id}: {exc.record.error}")

    await bounded(todo, one, concurrency=concurrency, label=f"{suite.name} extract", progress=progress)
    return len(todo)


def with_readings(records: list[Record], extracted: list[Record], spec: str) -> tuple[list[Record], dict]:
    """The records with the extractor's readings in place of the rules' none (copies; the rule
    readings that are not none are never touched), and counts: sent, read, still none, by stage.
    An answer the rules read today (`rolebound report` re-extracts) keeps the rules' reading."""
    by_source = {r.meta.get("extracts"): r for r in extracted
                 if r.error is None and (r.meta or {}).get("extractor") == spec}
    out, by_stage = [], {}
    for r in records:
        e = by_source.get(r.call_id)
        if e is None or r.parsed != INVALID:
            out.append(r)
            continue
        c = by_stage.setdefault(r.stage, {"sent": 0, "read": 0})
        c["sent"] += 1
        if e.parsed == INVALID:
            out.append(r)
            continue
        c["read"] += 1
        new = r.model_copy(deep=True)
        new.parsed = e.parsed
        new.meta["extraction"] = {"rule": f"model:{spec}", "span": (e.response or "")[:160]}
        if r.gold is not None:
            new.correct = new.parsed == r.gold
        out.append(new)
    sent, read = sum(c["sent"] for c in by_stage.values()), sum(c["read"] for c in by_stage.values())
    return out, {"sent": sent, "read": read, "none": sent - read, "by_stage": by_stage}


def figures(suite, records: list[Record], extracted: list[Record], manifest) -> dict[str, Any] | None:
    """metrics["model_extraction"]: the extractor, its counts per stage, and the suite's metrics
    and summary lines recomputed with its readings. None without an extractor on the manifest."""
    spec = getattr(manifest, "extractor", None)
    if not spec:
        return None
    merged, counts = with_readings(records, extracted, spec)
    metrics = suite.metrics(merged, manifest)
    try:
        summary = [[k, v] for k, v in suite.summary(metrics)]
    except Exception:  # noqa: BLE001 - a summary that cannot be made is left out, the metrics stay
        summary = []
    return {"extractor": spec, **counts, "summary": summary, "metrics": metrics}
