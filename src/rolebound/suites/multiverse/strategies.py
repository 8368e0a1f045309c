"""The multiverse strategies: one item -> model calls.

Stages per item and strategy
- direct/cot:  "answer" (cot with logprob scoring: "answer.reason" generates the reasoning, then
  "answer" reads the letter after it), then the reasoning analysis on the reply text: "segment"
  and "judge" (role=judge). The segmenter's record holds the LLM segmentation (`segmenter: llm`)
  or, when that is invalid and segment_fallback=rules, the rule-based one of the reply
  (`segmenter: rules`, rules.py). The judge generates "t,a" (judge_scoring=generate),
  or (judge_scoring=logprob) "judge.think" scores the digits 0-5 as the reply's first token and
  "judge" the digits after "t,".
- cross-*:     "as.<played version>" (and "as.<played>.reason" for cot) for every other version of
  the item's hero; no analysis.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from ...protocol import is_demo_spec
from ...records import INVALID, Message
from ...scoring import extract
from ...scoring import order
from ..base import DIALOGUE, DIALOGUE_DESCRIPTION
from .prompts import (ANSWER_PREFIX, CONFLICTS, JUDGE, JUDGE_DIGITS, LETTERS, SEGMENT, attributes_text,
                                 canon_prompt, dilemma_prompt, lore_text, parse_judge,
                                 parse_letter_continuation, parse_segments, persona, think_act_matching)
from .rules import rule_segments
from .data import DIALOGUE_BANK
from .prompts import canon_question

if TYPE_CHECKING:  # pragma: no cover - the dialogue modules load only for a dialogue run
    from ...dialogue.run import Plan, Probe, Turn


# name -> what `rolebound suites multiverse` says of it
STRATEGIES = {
    "direct": "the paper's prompt, answered directly",
    "cot": "the same prompt with \"Let's think step by step.\" (Table 3)",
    "cross-direct": "each question asked of the hero's other versions, direct (Tables 9, 11)",
    "cross-cot": "each question asked of the hero's other versions, with CoT",
    DIALOGUE: DIALOGUE_DESCRIPTION + "; canon and dilemma probes, direct",
}


# Paper Table 4: 1024 output tokens. The bundled CPU model gets short caps so that the default
# run stays short on 2 cores (past a few dozen tokens it mostly repeats itself).
LIMITS = {"cot_max_tokens": 1024, "segment_max_tokens": 1024, "judge_max_tokens": 64}
SMALL_LIMITS = {"cot_max_tokens": 64, "segment_max_tokens": 192, "judge_max_tokens": 16}


def limit(suite, settings, key: str) -> int | None:
    """A call's token cap; None: the run's decoding decides (under the paper's protocol the
    answers and the judge get their Table 4 limits from the answer and judge decoding)."""
    v = getattr(settings.options, key)
    if v is not None:
        return int(v)
    if settings.protocol == "paper" and key in ("cot_max_tokens", "judge_max_tokens"):
        return None
    # the demo model (as the model, or as the segmenter/judge) gets short caps by default
    small = settings.demo
    if key != "cot_max_tokens" and settings.judge:
        small = is_demo_spec(settings.judge)
    return (SMALL_LIMITS if small else LIMITS)[key]


def judge_input(suite, settings) -> str:
    """What the judge reads: the segmenter's thinking/acting output, as the paper's judge does
    (Section 4.2, Figure 2), under the paper's protocol; the raw reply (the authors' scoring.py)
    on the demo model. `--set judge_input=raw|segmented` decides either way."""
    return settings.options.judge_input or ("segmented" if settings.protocol == "paper" else "raw")


def item_meta(index, item) -> dict[str, Any]:
    hero = index.hero_of(item.version)
    meta = {"task": item.task, "hero": hero.id, "version": item.version, "played": item.version,
            "cross": False, "key": item.key}
    if item.task == "canon":
        meta.update(phase=item.phase, part=item.part)
    else:
        meta.update(conflict=item.conflict, iteration=item.iteration)
    return meta


def build_prompt(suite, item, played: str, cot: bool, settings, shown: list[int] | None = None) -> str:
    """The paper's prompt; `shown` (scoring.order) puts the options in another order (a dilemma's
    poles in its question follow their choices)."""
    _, ver = settings.state.index.versions[played]
    attrs = attributes_text(ver.attributes.model_dump()) if settings.options.attributes else ""
    who = persona(ver.name, lore_text(ver.universe, ver.work), attrs)
    if item.task == "canon":
        return canon_prompt(who, item.question, order.apply(item.options, shown or range(len(item.options))), cot)
    choices = [(c.text, c.consequence) for c in item.choices]
    return dilemma_prompt(who, item.situation, order.apply(choices, shown or [0, 1]), item.conflict, cot,
                          swapped=bool(shown) and list(shown) != [0, 1])


async def answer(suite, item, ctx, *, played: str, stage: str, cot: bool, settings, meta: dict,
                 shown: list[int] | None = None):
    """Ask the item as `played`; returns the reply record whose text the analysis reads (None
    when the answer was read by log-likelihood only). `shown`: another option order."""
    n = len(item.options) if item.task == "canon" else 2
    letters = (LETTERS if item.task == "canon" else "AB")[:n]
    gold = item.answer if item.task == "canon" else item.canonical
    if shown is not None and gold is not None and gold in letters:
        gold = letters[order.shown_position(shown, letters.index(gold))]
    msgs = [Message(role="user", content=build_prompt(suite, item, played, cot, settings, shown))]
    # mc/labels/order: what rolebound.stats.position_bias reads
    meta = {**meta, "mode": "cot" if cot else "direct", "letters": letters, "mc": item.task,
            "labels": list(letters), **({"order": list(shown)} if shown is not None else {})}
    if settings.scoring == "logprob":
        conts = [" " + L for L in letters]
        if not cot:
            await ctx.score(stage, conts, messages=msgs, assistant_prefix=ANSWER_PREFIX,
                            parse=parse_letter_continuation, gold=gold, meta=meta)
            return None
        reason = await ctx.chat(f"{stage}.reason", msgs, max_tokens=limit(suite, settings, "cot_max_tokens"), meta=meta)
        await ctx.score(stage, conts, messages=msgs,
                        assistant_prefix=(reason.response or "").rstrip() + "\n\n" + ANSWER_PREFIX,
                        parse=parse_letter_continuation, gold=gold, meta=meta)
        return reason
    cap = limit(suite, settings, "cot_max_tokens") if cot else settings.options.direct_max_tokens
    return await ctx.chat(stage, msgs, parse=answer_extractor(item, shown), gold=gold,
                          max_tokens=int(cap) if cap is not None else None, meta=meta)


def answer_extractor(item, shown: list[int] | None = None) -> extract.Extractor:
    """The options as the prompt shows them: canon "A) ..."; a dilemma's "Choice A: ..." under its
    question "A) Hero vs B) Villain" (parsed stays the letter)."""
    if item.task == "canon":
        return extract.choice(zip(LETTERS, order.apply(item.options, shown or range(len(item.options)))), "label")
    poles = CONFLICTS[item.conflict]
    pairs = order.apply([(poles[k], c.text) for k, c in enumerate(item.choices)], shown or [0, 1])
    return extract.choice([(L, f"{p}: {t}") for L, (p, t) in zip("AB", pairs)], "label")


def segment_cap(suite, settings, reply) -> int:
    """The segmenter rewrites the reply with tags: about its length plus the tags, never more
    than segment_max_tokens."""
    cap = limit(suite, settings, "segment_max_tokens")
    if reply.completion_tokens:
        return min(cap, int(reply.completion_tokens * 1.25) + 32)
    return cap


async def judge_reply(ctx, ver, response: str, meta: dict, by_logprob: bool, max_tokens: int | None,
                      round_: int = 0):
    """The 0-5 thinking/acting judge of one reply (Section 4.2, Table 14): written, or read by
    log-likelihood (the likeliest first digit, then the likeliest after "t,")."""
    from ...rejudge import judge_stage

    lore = lore_text(ver.universe, ver.work)
    attrs = attributes_text(ver.attributes.model_dump()) or "-"
    prompt = [Message(role="user", content=JUDGE.format(name=ver.name, lore=lore, attributes=attrs,
                                                        response=response))]
    m = {**meta, "judge_scoring": "logprob" if by_logprob else "generate"}
    if round_:
        m["judge_round"] = round_
    stage = judge_stage("judge", round_)
    if not by_logprob:
        return await ctx.chat(stage, prompt, role="judge", parse=parse_judge, max_tokens=max_tokens, meta=m)
    think = await ctx.score(judge_stage("judge.think", round_), JUDGE_DIGITS, messages=prompt, role="judge", meta=m)
    t = think.response
    return await ctx.score(stage, JUDGE_DIGITS, messages=prompt, assistant_prefix=f"{t},", role="judge",
                           parse=lambda a: parse_judge(f"{t},{a}"), meta=m)


async def analyse(suite, item, ctx, reply, settings, meta: dict) -> None:
    """Section 4.2: segment into thinking/acting, judge both 0-5, Think-Act Matching."""
    text = reply.response or ""
    if not text.strip():
        return
    _, ver = settings.state.index.versions[item.version]
    embedder = settings.state.embedder

    fallback = settings.options.segment_fallback == "rules"
    cut = reply.finish_reason == "length"

    def parse_seg(seg_reply: str):
        seg = parse_segments(seg_reply)
        if seg != INVALID:
            seg = {**seg, "segmenter": "llm"}
        elif fallback:
            # the reply itself, never the segmenter's text
            seg = rule_segments(text, cut, list(answer_extractor(item).options))
        return seg if seg == INVALID else think_act_matching(seg, embedder)

    seg_call = ctx.chat("segment", [Message(role="user", content=SEGMENT.format(response=text))], role="judge",
                        parse=parse_seg, max_tokens=segment_cap(suite, settings, reply),
                        meta={**meta, "embedder": getattr(embedder, "name", None),
                              "segment_fallback": "rules" if fallback else "none"})
    judge_max = limit(suite, settings, "judge_max_tokens")
    by_logprob = settings.options.judge_scoring == "logprob"

    async def judge_call(response: str, source: str):
        return await judge_reply(ctx, ver, response, {**meta, "judge_input": source}, by_logprob, judge_max)

    if judge_input(suite, settings) == "segmented":
        seg = await seg_call
        if isinstance(seg.parsed, dict) and seg.parsed.get("segmenter") == "llm":
            await judge_call(seg.response or "", "segmented")
    else:
        # the authors' scoring.py: the judge reads the reply itself, independent of the segmenter
        await asyncio.gather(seg_call, judge_call(text, "raw"))


async def run_item(suite, item, ctx, strategy: str, settings) -> None:
    if strategy == DIALOGUE:
        from ...dialogue.run import run_probes

        await run_probes(ctx, dialogue_probes(suite, item, settings), settings, settings.options)
        return
    cot = strategy.endswith("cot")
    idx = settings.state.index
    meta = item_meta(idx, item)
    if strategy.startswith("cross-"):

        async def as_version(ver):
            own = idx.own_canon_answer(item, ver.id) if item.task == "canon" else idx.own_dilemma_choice(item, ver.id)
            m = {**meta, "played": ver.id, "cross": True, "gold_own": own}
            await answer(suite, item, ctx, played=ver.id, stage=f"as.{ver.id}", cot=cot, settings=settings, meta=m)

        await asyncio.gather(*(as_version(v) for v in idx.siblings(item.version)))
        return
    reply = await answer(suite, item, ctx, played=item.version, stage="answer", cot=cot, settings=settings, meta=meta)
    n = len(item.options) if item.task == "canon" else 2
    for k in range(1, min(settings.options.permutations, n)):   # --set permutations=K
        await answer(suite, item, ctx, played=item.version, stage=f"answer~s{k}", cot=cot, settings=settings,
                     meta={**meta, "shift": k}, shown=order.cyclic(n, k))
    if reply is not None and suite.analysis_on(settings):
        await analyse(suite, item, ctx, reply, settings, meta)


def extractor_for(record):
    """How to read a stored answer that predates stored extractor specs (`rolebound report`)."""
    letters = (record.meta or {}).get("letters")
    if record.role != "model" or not letters or record.stage.endswith(".reason") or \
            not isinstance(record.prompt, list) or not record.prompt:
        return None
    text = record.prompt[-1].get("content") or ""
    if record.meta.get("task") == "canon":
        # the last option line carries the prompt's tail: "D) Ned Leeds, Let's think step by step.<question/>"
        options = [(L, re.sub(r"(?:,\s*Let's think step by step\.)?\s*<question/>\s*$", "", o))
                   for L, o in re.findall(r"(?m)^([A-D])\) (.*)$", text)]
    else:
        found = [re.search(rf"Choice {L}: (.*?) Consequence {L}:", text, re.S) for L in "AB"]
        poles = CONFLICTS.get(record.meta.get("conflict"), ("", ""))
        options = [(L, f"{poles[k]}: {m.group(1)}") for k, (L, m) in enumerate(zip("AB", found)) if m]
    return extract.choice(options, "label") if len(options) >= 2 else None


# -- re-judging (`rolebound report RUN --judge MODEL`, rolebound.rejudge) ---------------------------
def rejudge_plan(suite, records, manifest, judge):
    """Every reply the run's judge read, judged again by `judge` as the run did (the segmented
    spans, or the raw reply: `judge_input`); the segmenter's records are kept as they are."""
    from ...rejudge import judge_modes
    from ..base import JudgePlan, settings_from_manifest

    settings = settings_from_manifest(suite, manifest)
    settings.protocol = (manifest.protocol or {}).get("mode") or "none"
    settings.judge = judge.spec
    from ...hub import load_data

    dataset = load_data(suite, None if manifest.dataset.startswith("builtin:") else manifest.dataset, settings)
    index = dataset.extra["index"]
    by_logprob = suite.judge_scoring({}, judge) == "logprob"
    judge_max = limit(suite, settings, "judge_max_tokens")
    segmented = judge_input(suite, settings) == "segmented"
    segments = {(r.item_id, r.strategy, r.repeat): r for r in records if r.stage == "segment" and r.error is None}
    answers = []
    for r in records:
        if r.stage != "answer" or r.role != "model" or r.error is not None or not (r.response or "").strip():
            continue
        seg = segments.get((r.item_id, r.strategy, r.repeat))
        if seg is None or (segmented and not (isinstance(seg.parsed, dict) and seg.parsed.get("segmenter") == "llm")):
            continue                       # the run's judge never read this reply
        answers.append(r)

    async def judge_one(ctx, a, round_: int, judge_spec: str):
        _, ver = index.versions[a.meta["version"]]
        seg = segments[(a.item_id, a.strategy, a.repeat)]
        text = (seg.response or "") if segmented else (a.response or "")
        meta = {k: v for k, v in a.meta.items() if k not in ("extract", "extraction", "letters")}
        meta.update(judge_input="segmented" if segmented else "raw", judge=judge_spec)
        await judge_reply(ctx, ver, text, meta, by_logprob, judge_max, round_)

    return JudgePlan(answers=answers, judge_one=judge_one, mode="logprob" if by_logprob else "generate",
                     modes=judge_modes(records, "judge"))


# -- the dialogue strategy (rolebound.dialogue, docs/dialogue.md) ----------------------------------
def dialogue_turns(item, kind: str, settings, n: int) -> list[Turn]:
    """scripted: the version's own lore questions, then generic ones; items: the version's other
    canon questions (by id, the probe left out) with their options."""
    from ...dialogue.bank import scripted_turns
    from ...dialogue.run import Turn, cycle_to

    if kind == "scripted":
        return scripted_turns(DIALOGUE_BANK, item.version, n)
    pool = sorted((i for i in settings.state.items
                   if i.task == "canon" and i.version == item.version and i.id != item.id), key=lambda i: i.id)
    return cycle_to([Turn(canon_question(i.question, i.options), f"item:{i.id}") for i in pool[:n]], n)


def plan_for(suite, item, kind: str, settings) -> Plan:
    """The first user turn carries the paper's persona line (name, lore, attributes)."""
    from ...dialogue import depths
    from ...dialogue.run import Plan

    opts = settings.options
    _, ver = settings.state.index.versions[item.version]
    attrs = attributes_text(ver.attributes.model_dump()) if opts.attributes else ""
    who = persona(ver.name, lore_text(ver.universe, ver.work), attrs)
    base = dict(kind=kind, opener=who + "\n{text}", persona=ver.name, assistant_name=ver.name)
    if kind in ("scripted", "items"):
        return Plan(key=item.version, turns=dialogue_turns(item, kind, settings, max(depths(opts))), **base)
    if opts.goal == "pressure":       # simulated: steer toward the question's or dilemma's matter
        topic = item.question if item.task == "canon" else item.situation
        return Plan(key=f"{item.version}/{item.id}", topic=f"the matter behind this: {topic}", **base)
    return Plan(key=item.version, **base)


def dialogue_probes(suite, item, settings) -> list[Probe]:
    """The canon question or dilemma, direct, as the item's own version (the `direct` prompt)."""
    from ...dialogue.run import Probe

    letters = LETTERS if item.task == "canon" else "AB"
    gold = item.answer if item.task == "canon" else item.canonical
    meta = {**item_meta(settings.state.index, item), "mode": "direct", "letters": letters}
    cap = settings.options.direct_max_tokens

    async def ask(ctx, stage, messages, m):
        if settings.scoring == "logprob":
            return await ctx.score(stage, [" " + L for L in letters], messages=messages, assistant_prefix=ANSWER_PREFIX,
                                   parse=parse_letter_continuation, gold=gold, meta={**meta, **m})
        return await ctx.chat(stage, messages, parse=answer_extractor(item), gold=gold,
                              max_tokens=int(cap) if cap is not None else None, meta={**meta, **m})

    msgs = [Message(role="user", content=build_prompt(suite, item, item.version, False, settings))]
    return [Probe(name=item.task, messages=msgs, plan=lambda kind: plan_for(suite, item, kind, settings), ask=ask,
                  max_tokens=int(cap) if cap is not None else None)]
