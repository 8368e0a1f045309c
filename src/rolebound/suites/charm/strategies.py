"""CHARM's strategies: the model calls of one item (independent, sequential, no-role), the
Table 14 distractor similarity computed before the first call, and how a stored reply is read."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Sequence

from ...records import Message
from ...scoring import extract
from ..base import DIALOGUE, DIALOGUE_DESCRIPTION, RunSettings
from .data import CharmItem, is_abstain
from .data import dialogue_bank
from .prompts import ANSWER_PREFIX, answer_number, first_digit, ba_prompt, dialogue_opener, mcq_prompt, no_role_prompt

if TYPE_CHECKING:  # pragma: no cover - the dialogue modules load only for a dialogue run
    from ...dialogue.run import Plan, Probe, Turn


# name -> what `rolebound suites charm` says of it
STRATEGIES = {
    "independent": "BA, BC and KV each in a fresh conversation (the paper's protocol)",
    "sequential": "BA then BC in one conversation (Appendix M, Table 15)",
    "no-role": "Cross-Universe BC questions with no role (Appendix N, Table 16)",
    DIALOGUE: DIALOGUE_DESCRIPTION + "; BA and BC probes",
}


def _yes_no_cont(text: str) -> str:
    return text.strip()


def mean_similarity(groups: dict[str, tuple[str, Sequence[str]]], path: str | None = None,
                    digits: int = 4) -> dict[str, float]:
    """For each id, the mean cosine between its anchor text and its other texts (CHARM Table 14:
    distractors against the answer). One batch of unique texts, cached on disk."""
    from ...scoring.embeddings import encode_cached

    texts = list(dict.fromkeys(t for anchor, others in groups.values() for t in (anchor, *others)))
    vecs = encode_cached(texts, path, kind="charm-options")
    row = {t: i for i, t in enumerate(texts)}
    out = {}
    for gid, (anchor, others) in groups.items():
        if others:
            sims = vecs[[row[t] for t in others]] @ vecs[row[anchor]]
            out[gid] = round(float(sims.mean()), digits)
    return out


async def before_items(items, settings: RunSettings, opts) -> None:
    """Distractor-to-answer similarity per MCQ (Table 14), kept in settings.state for the records' meta."""
    if not opts.similarity:
        return
    mcqs = [i for i in items if i.stage in ("bc", "kv") and i.answer]
    if not mcqs:
        return
    from ...scoring.embeddings import embedder_name

    groups = {i.id: (i.answer, [o for o in i.options if o != i.answer and not is_abstain(o)]) for i in mcqs}
    settings.state.embedder = embedder_name(opts.embedder)
    if settings.partial:        # an inspect task: each MCQ on its first job (prepare_item)
        settings.state.sim, settings.state.sim_groups = {}, groups
        return
    # cached on disk by the option texts and the embedder (a re-run loads no model)
    settings.state.sim = await asyncio.to_thread(mean_similarity, groups, opts.embedder)


async def prepare_item(item, settings: RunSettings, opts) -> None:
    """An inspect task's similarity for one MCQ, on its first job (before_items left it for later)."""
    groups, sim = settings.state.sim_groups or {}, settings.state.sim
    if item.id in groups and sim is not None and item.id not in sim:
        sim.update(await asyncio.to_thread(mean_similarity, {item.id: groups[item.id]}, opts.embedder))


def variant(settings: RunSettings) -> str:
    """The BC/KV prompt (--set prompt): "paper" (Table 20) or "authors" (their release's template)."""
    return getattr(settings.options, "prompt", None) or "paper"


def item_meta(item: CharmItem, settings: RunSettings) -> dict[str, Any]:
    m = item.meta()
    sim = settings.state.sim or {}
    if item.id in sim:
        m["sim"], m["embedder"] = sim[item.id], settings.state.embedder
    return m


async def ask_ba(ctx, stage: str, item: CharmItem, messages: list[Message], scoring: str, meta,
                 extraction: str, question: str | None = None, gold: str = "No"):
    if scoring == "logprob":
        return await ctx.score(stage, ["Yes", "No"], messages=messages, parse=_yes_no_cont, gold=gold, meta=meta)
    strict = extraction == "strict"
    return await ctx.chat(stage, messages, parse=extract.yes_no(question or item.question, strict=strict),
                          gold=gold, meta=meta)


async def ask_mcq(ctx, stage: str, messages: list[Message], item: CharmItem, gold: int, scoring: str, meta,
                  extraction: str, options: list[str] | None = None, variant: str = "paper"):
    options = list(item.options or []) if options is None else options
    n = len(options)
    # what position-bias statistics need (rolebound.stats.position_bias): the stage, the labels shown
    meta = {**meta, "mc": meta.get("mc") or stage, "labels": [str(k) for k in range(1, n + 1)]}
    if scoring == "logprob":
        return await ctx.score(stage, [str(k) for k in range(1, n + 1)], messages=messages,
                               assistant_prefix=ANSWER_PREFIX, parse=int, gold=gold, meta=meta)
    # the options as choices_text shows them: "1. ...", "2. ..."; parsed stays the 1-based number
    options = [(str(k), o) for k, o in enumerate(options, 1)]
    strict = first_digit if variant == "authors" else answer_number      # each prompt's own answer line
    parse = strict(options) if extraction == "strict" else extract.choice(options, "number")
    return await ctx.chat(stage, messages, parse=parse, gold=gold, meta=meta)


async def ask_reordered(ctx, stage: str, item: CharmItem, scoring: str, meta, extraction: str, shown: list[int],
                        extra: dict, variant: str = "paper") -> Any:
    """The item's MCQ with its options in another order (`shown[p]`: the paper-order index shown
    at p); gold follows its option. The record keeps the order (stats.chosen)."""
    from ...scoring import order

    options = order.apply(item.options or [], shown)
    gold = order.shown_position(shown, int(item.gold) - 1) + 1
    m = {**meta, **extra, "mc": item.stage, "order": list(shown)}
    return await ask_mcq(ctx, stage, [Message(role="user", content=mcq_prompt(item, options, variant))], item, gold,
                         scoring, m, extraction, options=options, variant=variant)


async def run_item(item: CharmItem, ctx, strategy: str, settings: RunSettings) -> None:
    """One item's calls under one strategy (the suite's run_item)."""
    opts = settings.options
    extraction, permutations = opts.extraction, opts.permutations
    if settings.partial:
        await prepare_item(item, settings, opts)
    scoring = settings.scoring or "generate"
    meta = item_meta(item, settings)
    v = variant(settings)
    if strategy == "independent":
        if item.stage == "ba":
            await ask_ba(ctx, "ba", item, [Message(role="user", content=ba_prompt(item))], scoring, meta, extraction)
        else:
            await ask_mcq(ctx, item.stage, [Message(role="user", content=mcq_prompt(item, variant=v))], item,
                          int(item.gold), scoring, meta, extraction, variant=v)
            for k in range(1, permutations):      # --set permutations=K: cyclic shifts, stages bc~s1, ...
                from ...scoring import order

                await ask_reordered(ctx, f"{item.stage}~s{k}", item, scoring, meta, extraction,
                                    order.cyclic(len(item.options or []), k), {"shift": k}, v)
    elif strategy == "sequential":
        if item.stage != "bc":
            return
        first = [Message(role="user", content=ba_prompt(item, item.ba_question))]
        ba = await ask_ba(ctx, "seq.ba", item, first, scoring, meta, extraction, question=item.ba_question)
        convo = first + [Message(role="assistant", content=ba.response or ""),
                         Message(role="user", content=mcq_prompt(item, variant=v))]
        await ask_mcq(ctx, "seq.bc", convo, item, int(item.gold), scoring, meta, extraction, variant=v)
    elif strategy == DIALOGUE:
        from ...dialogue.run import run_probes

        await run_probes(ctx, dialogue_probes(item, settings, extraction), settings, settings.options)
    elif strategy == "no-role":
        if item.stage != "bc" or item.boundary != "cross":
            return
        # correct = the factual answer: the control asks whether the fact is accessible at all
        await ask_mcq(ctx, "nr", [Message(role="user", content=no_role_prompt(item))], item,
                      int(item.fact_option), scoring, meta, extraction)


async def override_control(session, dataset, settings: RunSettings, opts) -> None:
    """Each override candidate's (Cross-Universe, BA+ & FC-BC) KV question again (stage kv~ctl)
    with its options in a fixed, seeded order under which the factual option stands neither where
    it stood in the KV question nor where the factual answer stood in the BC question."""
    from ...runner import bounded
    from ...runner import CallFailed, ItemContext
    from ...store import load_records
    from .metrics import instances

    scoring = settings.scoring or "generate"
    by_id = {i.id: i for i in dataset.items}
    recs = load_records(session.run_dir.path)
    jobs = []
    for rep in range(settings.repeats):
        for c in instances([r for r in recs if r.repeat == rep]):
            kv = by_id.get(c.get("kv_id") or "")
            if c["boundary"] == "cross" and c["ba"] and c["fc_bc"] and c["kv"] is not None and kv is not None:
                jobs.append((kv, rep, c))

    async def one(job):
        from ...scoring import order

        kv, rep, c = job
        n, gold = len(kv.options or []), int(kv.gold) - 1
        away = {gold} | ({int(c["fact_option"]) - 1} if c.get("fact_option") else set())
        shown = order.moved(f"charm-kv-control:{opts.data_seed}:{kv.id}", n, sorted(away), gold)
        ctx = ItemContext(session=session, item_id=kv.id, strategy="independent", repeat=rep)
        try:
            await ask_reordered(ctx, "kv~ctl", kv, scoring, item_meta(kv, settings), opts.extraction, shown,
                                {"control": "kv-order"}, opts.prompt)
        except CallFailed as exc:      # recorded with its error; retried on resume
            session.counts.items_failed += 1
            session.errors.append(f"{exc.record.call_id}: {exc.record.error}")

    await bounded(jobs, one, concurrency=16, label="charm: override control",
                  progress=bool(jobs) and settings.state.progress)


YES_CONTROL = "ba~yes"


def yes_control_jobs(recs, items, repeats: int) -> list[tuple]:
    """(role's BA item, Yes question, repeat): every Yes question of each historical role whose BA
    questions this run asked (a --limit subset keeps a few roles, so the control follows it)."""
    from .data import load_ba_control

    control = load_ba_control().roles
    asked = {r.meta.get("role") for r in recs if r.strategy == "independent" and r.stage == "ba"}
    first: dict[str, CharmItem] = {}
    for i in items:
        if i.stage == "ba" and i.role in asked:
            first.setdefault(i.role, i)
    jobs = []
    for role, item in sorted(first.items()):
        jobs += [(item, q, rep) for rep in range(repeats) for q in control.get(role) or []]
    return jobs


async def yes_control(session, dataset, settings: RunSettings, opts) -> None:
    """The BA Yes control (stage ba~yes): in-boundary awareness questions whose answer is Yes, asked
    as BA is asked (Table 19, the same reading), so that a model that always says No shows."""
    from ...runner import bounded
    from ...runner import CallFailed, ItemContext
    from ...store import load_records

    scoring = settings.scoring or "generate"
    jobs = yes_control_jobs(load_records(session.run_dir.path), dataset.items, settings.repeats)

    async def one(job):
        item, q, rep = job
        ctx = ItemContext(session=session, item_id=f"{YES_CONTROL}/{item.role}/{q.id}", strategy="independent",
                          repeat=rep)
        meta = {"stage": YES_CONTROL, "role": item.role, "region": item.region, "target": q.id,
                "control": "ba-yes"}
        try:
            await ask_ba(ctx, YES_CONTROL, item, [Message(role="user", content=ba_prompt(item, q.question))],
                         scoring, meta, opts.extraction, question=q.question, gold="Yes")
        except CallFailed as exc:      # recorded with its error; retried on resume
            session.counts.items_failed += 1
            session.errors.append(f"{exc.record.call_id}: {exc.record.error}")

    await bounded(jobs, one, concurrency=16, label="charm: BA Yes control",
                  progress=bool(jobs) and settings.state.progress)


def extractor_for(record):
    """How to read a stored reply that predates stored extractor specs (`rolebound report`)."""
    if record.role != "model" or not isinstance(record.prompt, list) or not record.prompt:
        return None
    text = record.prompt[-1].get("content") or ""
    if record.stage in ("ba", "seq.ba", YES_CONTROL):
        q = re.search(r"Question: (.*)", text)
        return extract.yes_no(q.group(1).strip() if q else None)
    if "Choices:\n" in text:
        block = text.split("Choices:\n", 1)[1].split("\nFirst, briefly", 1)[0]
        options = re.findall(r"(?m)^(\d+)\. (.*)$", block)
        return extract.choice(options, "number") if options else None
    return None


# -- the dialogue strategy (rolebound.dialogue, docs/dialogue.md) ----------------------------------
def item_turns(item: CharmItem, pool: list[CharmItem], n: int) -> list[Turn]:
    """`items` warm-up: the role's other BA questions (other targets), in id order. A historical
    role has no in-boundary CHARM item (every concept and target is past its era)."""
    from ...dialogue.run import Turn, cycle_to

    others = sorted((i for i in pool if i.stage == "ba" and i.role == item.role and i.target != item.target),
                    key=lambda i: i.id)
    return cycle_to([Turn(i.question, f"item:{i.id}") for i in others], n)


def plan_for(item: CharmItem, kind: str, settings: RunSettings) -> Plan:
    from ...dialogue.bank import scripted_turns
    from ...dialogue import depths
    from ...dialogue.run import Plan

    n = max(depths(settings.options))
    base = dict(kind=kind, opener=dialogue_opener(item), persona=item.role_name, assistant_name=item.role_name)
    if kind == "scripted":
        return Plan(key=item.role, turns=scripted_turns(dialogue_bank(), item.role, n), **base)
    if kind == "items":
        return Plan(key=item.role, turns=item_turns(item, settings.state.items, n), **base)
    if settings.options.goal == "pressure":      # simulated: steer toward the probe's concept or target
        return Plan(key=f"{item.role}/{item.target}", topic=item.target_name, **base)
    return Plan(key=item.role, **base)


def dialogue_probes(item: CharmItem, settings: RunSettings, extraction: str) -> list[Probe]:
    """BA or BC, asked as the independent strategy asks it."""
    from ...dialogue.run import Probe

    if item.stage not in ("ba", "bc"):
        return []
    scoring = settings.scoring or "generate"
    meta = item_meta(item, settings)
    if item.stage == "ba":
        msgs = [Message(role="user", content=ba_prompt(item))]

        async def ask(ctx, stage, messages, m):
            return await ask_ba(ctx, stage, item, messages, scoring, {**meta, **m}, extraction)
    else:
        v = variant(settings)
        msgs = [Message(role="user", content=mcq_prompt(item, variant=v))]

        async def ask(ctx, stage, messages, m):
            return await ask_mcq(ctx, stage, messages, item, int(item.gold), scoring, {**meta, **m}, extraction,
                                 variant=v)
    return [Probe(name=item.stage, messages=msgs, plan=lambda kind: plan_for(item, kind, settings), ask=ask)]
