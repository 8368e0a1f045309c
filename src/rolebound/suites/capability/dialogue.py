"""capability's dialogue strategy: each role's question (the Identity variant, C.1) after N
earlier exchanges (rolebound.dialogue).

Warm-ups
- scripted: questions at the role's own level (data/dialogue.yaml).
- items: the role's in-role bank questions (at or below its ceiling; the probe left out), asked in
  the C.9 format. Kindergarten has none: its turns are the scripted ones (their source says so).
- simulated: a user model talks to the role (goal=pressure: toward the probe's subject and level).
Figures: TA, IA and A pooled over (question, role) answers. TA equals Table 3's macro mean (each
role answers every question); IA and A weigh roles by their questions.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ...dialogue import metrics as dm
from ...dialogue.options import depths
from ...dialogue.run import Plan, Probe, Turn, cycle_to
from ...io import read_yaml, validate_yaml
from . import prompts as cp
from .boxed import parse_boxed_letter

NAMES = ["TA", "IA", "A"]
VARIANT = "identity"


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    source: str | None = None
    note: str | None = None
    validated: bool = False


class Bank(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    validated: bool = False
    roles: dict[str, list[Entry]] = Field(default_factory=dict)


@lru_cache(maxsize=2)
def load_bank() -> Bank:
    p = Path(str(resources.files(__package__) / "data" / "dialogue.yaml"))
    return validate_yaml(Bank, read_yaml(p), file=p)


def scripted_turns(role, n: int) -> list[Turn]:
    return cycle_to([Turn(e.text, f"scripted:{e.id}") for e in load_bank().roles.get(role.id, [])], n)


def item_turns(item, role, settings, n: int) -> list[Turn]:
    """The first n in-role questions (by id), the probe left out."""
    cfg = settings.state["cfg"]
    ranks = cfg.level_rank()
    if role.ceiling is None:
        return [Turn(t.text, t.source + " (no in-role items)") for t in scripted_turns(role, n)]
    pool = sorted((i for i in settings.state.get("capability_items", [])
                   if ranks[i.level] <= ranks[role.ceiling] and i.id != item.id), key=lambda i: i.id)
    return cycle_to([Turn(cp.user_message(i), f"item:{i.id}") for i in pool[:n]], n)


def plan_for(item, role, kind: str, settings, opts) -> Plan:
    n = max(depths(opts))
    head = [m for m in cp.chat_messages(VARIANT, item, role, settings.state["cfg"].subject_routes) if m.role == "system"]
    base = dict(kind=kind, opener="{text}", head=head, persona=f"{role.article} {role.name}",
                assistant_name=role.name)
    if kind == "scripted":
        return Plan(key=role.id, turns=scripted_turns(role, n), **base)
    if kind == "items":
        return Plan(key=role.id, turns=item_turns(item, role, settings, n), **base)
    if opts.goal == "pressure":
        cfg = settings.state["cfg"]
        level = cfg.levels[cfg.level_rank()[item.level]].name
        return Plan(key=f"{role.id}/{item.subject}/{item.level}", topic=f"{item.subject} questions at the {level} level",
                    **base)
    return Plan(key=role.id, **base)


def probes(suite, item, settings, meta_of) -> list[Probe]:
    opts = suite.opts(settings)
    cfg = settings.state["cfg"]
    out = []
    for role in settings.state["roles"]:
        meta = meta_of(role)

        async def ask(ctx, stage, messages, m, _meta=meta):
            return await ctx.chat(stage, messages, parse=parse_boxed_letter, gold=item.answer, meta={**_meta, **m})

        out.append(Probe(name=f"q.{role.id}", messages=cp.chat_messages(VARIANT, item, role, cfg.subject_routes),
                         plan=lambda kind, _r=role: plan_for(item, _r, kind, settings, opts), ask=ask))
    return out


def values(recs) -> dict[str, dict]:
    key = {id(r): f"{r.item_id}|{r.meta.get('role')}" for r in recs}
    return {"TA": {key[id(r)]: bool(r.correct) for r in recs},
            "IA": {key[id(r)]: bool(r.correct) for r in recs if r.meta.get("in_role") is True},
            "A": {key[id(r)]: bool(r.correct) for r in recs if r.meta.get("in_role") is False}}


def compute(records) -> dict:
    return dm.compute(records, values, NAMES)
