"""capability's strategies: one call per role for a role-prompted variant (chat, or the injection
variants' raw completion with a prefilled assistant turn), one no-role call, and the optional judge."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...records import ABCD, Message
from ...models.base import CHAT_TEMPLATE
from ..base import DIALOGUE, DIALOGUE_DESCRIPTION, RunSettings
from . import prompts
from .boxed import parse_boxed_letter
from .data import DIALOGUE_BANK, CapabilityItem, Role, RolesConfig
from .judge import judge_messages, parse_judge

if TYPE_CHECKING:  # pragma: no cover - the dialogue modules load only for a dialogue run
    from ...dialogue.run import Plan, Probe, Turn


# name -> what `rolebound suites capability` says of it
STRATEGIES = {
    "identity": "You are a <ROLE>. (C.1)",
    "description": "identity + capability and style boundaries (C.2)",
    "cot": "role-specific thinking template that guesses beyond the role (C.3)",
    "guideline": "rules forbidding knowledge beyond the role (C.4)",
    "explicit-idk": "answer idk beyond the role's capability (C.5)",
    "syllabus": "explicit-idk + the role's curriculum knowledge (C.6)",
    "injection": "guidelines + prefilled assistant turn, raw completion (C.7)",
    "injection-syllabus": "injection + the role's curriculum knowledge (C.8)",
    "no-role": "the question alone, once per question (baseline)",
    DIALOGUE: DIALOGUE_DESCRIPTION + "; each role's Identity question",
}


def base_meta(cfg: RolesConfig, item: CapabilityItem) -> dict[str, Any]:
    ranks = cfg.level_rank()
    lv = cfg.levels[ranks[item.level]]
    return {"level": item.level, "level_name": lv.name, "level_rank": ranks[item.level],
            "subject": item.subject, "mc": "answer", "labels": list(ABCD[:len(item.options)])}


def shifted(item: CapabilityItem, k: int) -> tuple[CapabilityItem, list[int]]:
    """The item with its options shifted cyclically by k (gold follows its option)."""
    from ...scoring import order

    shown = order.cyclic(len(item.options), k)
    return item.model_copy(update={"options": order.apply(item.options, shown),
                                   "answer": ABCD[order.shown_position(shown, ABCD.index(item.answer))]}), shown


async def run_item(item: CapabilityItem, ctx, strategy: str, settings: RunSettings, opts) -> None:
    cfg = settings.state.cfg
    base = base_meta(cfg, item)
    if strategy == DIALOGUE:
        from ...dialogue.run import run_probes

        await run_probes(ctx, dialogue_probes(item, settings), settings, opts)
        return
    if strategy == prompts.NO_ROLE:
        await ctx.chat("answer", prompts.chat_messages(prompts.NO_ROLE, item, None, {}), parse=parse_boxed_letter,
                       gold=item.answer, meta={**base, "role": None, "in_role": None})
        return
    jobs = [one_role(item, ctx, strategy, role, base, settings, opts) for role in settings.state.roles]
    for k in range(1, opts.permutations):     # --set permutations=K: cyclic shifts, not judged
        moved, shown = shifted(item, k)
        jobs += [one_role(moved, ctx, strategy, role, {**base, "shift": k, "order": shown}, settings, opts,
                          suffix=f"~s{k}") for role in settings.state.roles]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException):
            raise res

def role_meta(cfg: RolesConfig, role: Role, base: dict) -> dict[str, Any]:
    ranks = cfg.level_rank()
    ceiling = ranks[role.ceiling] if role.ceiling is not None else -1
    return {**base, "role": role.id, "role_label": role.label,
            "role_rank": [r.id for r in cfg.roles].index(role.id), "ceiling": role.ceiling,
            "in_role": base["level_rank"] <= ceiling}


async def one_role(item, ctx, strategy: str, role: Role, base: dict, settings: RunSettings, opts,
                   suffix: str = ""):
    cfg = settings.state.cfg
    meta = role_meta(cfg, role, base)
    stage = f"answer.{role.id}{suffix}"
    routes = cfg.subject_routes
    if strategy in prompts.INJECTION:
        msgs, prefill = prompts.injection_parts(strategy, item, role, routes)
        # the model's own reasoning opener (its chat template, or the think_tag backend option)
        tag = opts.think_tag
        tag = ctx.backend.thinking_markup() if tag is None else str(tag)
        meta["think_tag"] = tag
        if ctx.backend.supports(CHAT_TEMPLATE):
            raw = prompts.serialise_injection(ctx.backend.render_chat(msgs, add_generation_prompt=True), prefill, tag)
            rec = await ctx.complete(stage, raw, parse=parse_boxed_letter, gold=item.answer, meta=meta)
        else:       # PREFILL (vLLM): the server renders the template and continues the assistant turn
            msgs = msgs + [Message(role="assistant", content=(tag or "") + prefill)]
            rec = await ctx.chat(stage, msgs, parse=parse_boxed_letter, gold=item.answer,
                                 meta={**meta, "prefill": "continue_final_message"})
    else:
        rec = await ctx.chat(stage, prompts.chat_messages(strategy, item, role, routes), parse=parse_boxed_letter,
                             gold=item.answer, meta=meta)
    if settings.state.judge_on and not suffix:
        jmax = opts.judge_max_tokens
        await ctx.chat(f"judge.{role.id}", judge_messages(role, item, rec.response), role="judge",
                       parse=parse_judge, meta={**meta, "judged": rec.call_id},
                       max_tokens=int(jmax) if jmax else None)


# -- re-judging (`rolebound report RUN --judge MODEL`, rolebound.rejudge) ---------------------------
def rejudge_plan(suite, records, manifest, judge):
    """Every role-prompted answer judged again on the questions and roles the model saw."""
    from ...errors import InputError
    from ...models.base import CHAT
    from ...rejudge import ROUND, judge_stage
    from ..base import JudgePlan, settings_from_manifest
    from .metrics import answer_records

    settings = settings_from_manifest(suite, manifest)
    from ...hub import load_data

    dataset = load_data(suite, None if manifest.dataset.startswith("builtin:") else manifest.dataset, settings)
    if dataset.hash != manifest.dataset_hash:
        raise InputError("the questions or roles changed since this run; the judge would not see what the "
                         "model saw", file=manifest.dataset)
    items = {it.id: it for it in dataset.items}
    roles = {r.id: r for r in settings.state.cfg.roles}
    judge.require(CHAT, "the judge scores RV, C, RC in a chat")
    jmax = settings.options.judge_max_tokens

    async def judge_one(ctx, a, round_: int, judge_spec: str):
        role = roles[a.meta["role"]]
        await ctx.chat(judge_stage(f"judge.{role.id}", round_), judge_messages(role, items[a.item_id], a.response),
                       role="judge", parse=parse_judge,
                       meta={**a.meta, "judged": a.call_id, ROUND: round_, "judge": judge_spec},
                       max_tokens=int(jmax) if jmax else None)

    return JudgePlan(answers=[r for r in answer_records(records) if r.meta.get("role")], judge_one=judge_one)


# -- the dialogue strategy (rolebound.dialogue, docs/dialogue.md) ----------------------------------
DIALOGUE_VARIANT = "identity"      # the role prompt of every dialogue (C.1), the system message


def item_turns(item, role: Role, settings: RunSettings, n: int) -> list[Turn]:
    """`items` warm-up: the first n in-role questions (by id, the probe left out) in the C.9
    format; a role with no in-role level (kindergarten) gets its scripted turns, marked so."""
    from ...dialogue.bank import scripted_turns
    from ...dialogue.run import Turn, cycle_to

    ranks = settings.state.cfg.level_rank()
    if role.ceiling is None:
        return [Turn(t.text, t.source + " (no in-role items)") for t in scripted_turns(DIALOGUE_BANK, role.id, n)]
    pool = sorted((i for i in settings.state.items
                   if ranks[i.level] <= ranks[role.ceiling] and i.id != item.id), key=lambda i: i.id)
    return cycle_to([Turn(prompts.user_message(i), f"item:{i.id}") for i in pool[:n]], n)


def plan_for(item, role: Role, kind: str, settings: RunSettings) -> Plan:
    from ...dialogue import depths
    from ...dialogue.bank import scripted_turns
    from ...dialogue.run import Plan

    cfg = settings.state.cfg
    n = max(depths(settings.options))
    head = [m for m in prompts.chat_messages(DIALOGUE_VARIANT, item, role, cfg.subject_routes) if m.role == "system"]
    base = dict(kind=kind, opener="{text}", head=head, persona=f"{role.article} {role.name}", assistant_name=role.name)
    if kind == "scripted":
        return Plan(key=role.id, turns=scripted_turns(DIALOGUE_BANK, role.id, n), **base)
    if kind == "items":
        return Plan(key=role.id, turns=item_turns(item, role, settings, n), **base)
    if settings.options.goal == "pressure":      # simulated: steer toward the probe's subject and level
        level = cfg.levels[cfg.level_rank()[item.level]].name
        return Plan(key=f"{role.id}/{item.subject}/{item.level}", topic=f"{item.subject} questions at the {level} level",
                    **base)
    return Plan(key=role.id, **base)


def dialogue_probes(item, settings: RunSettings) -> list[Probe]:
    """Each role's question in the Identity variant (system: the role; user: C.9)."""
    from ...dialogue.run import Probe

    cfg = settings.state.cfg
    base = base_meta(cfg, item)
    out = []
    for role in settings.state.roles:
        meta = role_meta(cfg, role, base)

        async def ask(ctx, stage, messages, m, _meta=meta):
            return await ctx.chat(stage, messages, parse=parse_boxed_letter, gold=item.answer, meta={**_meta, **m})

        out.append(Probe(name=f"q.{role.id}", messages=prompts.chat_messages(DIALOGUE_VARIANT, item, role,
                                                                             cfg.subject_routes),
                         plan=lambda kind, _r=role: plan_for(item, _r, kind, settings), ask=ask))
    return out
