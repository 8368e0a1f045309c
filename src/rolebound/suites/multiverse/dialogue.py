"""multiverse's dialogue strategy: a canon question or a dilemma, asked directly as the item's
own version, after N earlier exchanges (rolebound.dialogue).

Warm-ups
- scripted: open questions about the version's own lore (data/dialogue.yaml), then generic ones.
- items: the version's other canon questions (by id, the probe left out), question and options.
- simulated: a user model talks to the version (goal=pressure: toward the probe's matter).
The first user turn carries the paper's persona line (name, lore, attributes).
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
from ...records import Message
from .prompts import ANSWER_PREFIX, LETTERS, attributes_text, canon_question, lore_text, parse_letter_continuation, persona

NAMES = ["canon", "dilemma"]


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
    generic: list[Entry] = Field(default_factory=list)
    versions: dict[str, list[Entry]] = Field(default_factory=dict)


@lru_cache(maxsize=2)
def load_bank() -> Bank:
    p = Path(str(resources.files(__package__) / "data" / "dialogue.yaml"))
    return validate_yaml(Bank, read_yaml(p), file=p)


def persona_of(suite, item, settings) -> tuple[str, str]:
    _, ver = settings.state["index"].versions[item.version]
    attrs = attributes_text(ver.attributes.model_dump()) if suite.opts(settings).attributes else ""
    return persona(ver.name, lore_text(ver.universe, ver.work), attrs), ver.name


def turns_for(item, kind: str, settings, n: int) -> list[Turn]:
    if kind == "scripted":
        bank = load_bank()
        return cycle_to([Turn(e.text, f"scripted:{e.id}") for e in bank.versions.get(item.version, []) + bank.generic], n)
    pool = sorted((i for i in settings.state.get("multiverse_items", [])
                   if i.task == "canon" and i.version == item.version and i.id != item.id), key=lambda i: i.id)
    return cycle_to([Turn(canon_question(i.question, i.options), f"item:{i.id}") for i in pool[:n]], n)


def plan_for(suite, item, kind: str, settings, opts) -> Plan:
    who, name = persona_of(suite, item, settings)
    base = dict(kind=kind, opener=who + "\n{text}", persona=name, assistant_name=name)
    if kind in ("scripted", "items"):
        return Plan(key=item.version, turns=turns_for(item, kind, settings, max(depths(opts))), **base)
    if opts.goal == "pressure":
        topic = item.question if item.task == "canon" else item.situation
        return Plan(key=f"{item.version}/{item.id}", topic=f"the matter behind this: {topic}", **base)
    return Plan(key=item.version, **base)


def probes(suite, item, settings) -> list[Probe]:
    from .strategies import answer_extractor, build_prompt, item_meta

    opts = suite.opts(settings)
    letters = LETTERS if item.task == "canon" else "AB"
    gold = item.answer if item.task == "canon" else item.canonical
    meta = {**item_meta(settings.state["index"], item), "mode": "direct", "letters": letters}
    cap = opts.direct_max_tokens

    async def ask(ctx, stage, messages, m):
        if settings.scoring == "logprob":
            return await ctx.score(stage, [" " + L for L in letters], messages=messages, assistant_prefix=ANSWER_PREFIX,
                                   parse=parse_letter_continuation, gold=gold, meta={**meta, **m})
        return await ctx.chat(stage, messages, parse=answer_extractor(item), gold=gold,
                              max_tokens=int(cap) if cap is not None else None, meta={**meta, **m})

    msgs = [Message(role="user", content=build_prompt(suite, item, item.version, False, settings))]
    return [Probe(name=item.task, messages=msgs, plan=lambda kind: plan_for(suite, item, kind, settings, opts), ask=ask,
                  max_tokens=int(cap) if cap is not None else None)]


def values(recs) -> dict[str, dict]:
    """Accuracy over the labelled answers (a dilemma without a canonical choice has no gold)."""
    from .metrics import accuracy_block  # noqa: F401 - the single-turn figure these equal at depth 0

    single = dm.relabel(recs, "direct", lambda r: "answer")
    return {t: {r.item_id: bool(r.correct) for r in single if r.meta.get("task") == t and r.gold is not None}
            for t in NAMES}


def compute(records) -> dict:
    return dm.compute(records, values, NAMES)
