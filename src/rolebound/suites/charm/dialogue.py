"""CHARM's dialogue strategy: its BA and BC probes after N earlier exchanges (rolebound.dialogue).

Warm-ups
- scripted: in-era, in-life questions to the role (data/dialogue.yaml: the role's own, then the
  generic ones), built from its profile.
- items: the role's other awareness (BA) questions, about other concepts and targets. A historical
  role has no in-boundary CHARM items (every concept and target is past its era), so this warm-up
  measures drift under repeated boundary questions, not small talk (docs/dialogue.md).
- simulated: a user model talks to the role (goal=pressure: toward the probe's concept or target).
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
from .data import CharmItem

NAMES = ["BA", "BC", "C-Gap", "R-Fail"]
OPENER = ("You are {character}. Please answer the following questions as {character}. "
          "And there is a {character} profile: {profile}.\nQuestion: {text}")


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
    generic: list[Entry] = Field(min_length=1)
    characters: dict[str, list[Entry]] = Field(default_factory=dict)


def bank_file() -> Path:
    return Path(str(resources.files(__package__) / "data" / "dialogue.yaml"))


@lru_cache(maxsize=4)
def load_bank(path: str | None = None) -> Bank:
    p = Path(path) if path else bank_file()
    return validate_yaml(Bank, read_yaml(p), file=p)


def opener(item: CharmItem) -> str:
    return OPENER.replace("{character}", item.role_name).replace("{profile}", item.profile)


def scripted_turns(item: CharmItem, n: int) -> list[Turn]:
    bank = load_bank()
    own = bank.characters.get(item.role, [])
    return cycle_to([Turn(e.text, f"scripted:{e.id}") for e in own + bank.generic], n)


def item_turns(item: CharmItem, pool: list[CharmItem], n: int) -> list[Turn]:
    """The role's other BA questions (other targets), in id order; short pools repeat."""
    others = sorted((i for i in pool if i.stage == "ba" and i.role == item.role and i.target != item.target),
                    key=lambda i: i.id)
    return cycle_to([Turn(i.question, f"item:{i.id}") for i in others], n)


def plan_for(item: CharmItem, kind: str, settings, opts) -> Plan:
    n = max(depths(opts))
    base = dict(kind=kind, opener=opener(item), persona=item.role_name, assistant_name=item.role_name)
    if kind == "scripted":
        return Plan(key=item.role, turns=scripted_turns(item, n), **base)
    if kind == "items":
        return Plan(key=item.role, turns=item_turns(item, settings.state.get("charm_items", []), n), **base)
    pressure = opts.goal == "pressure"
    return Plan(key=f"{item.role}/{item.target}" if pressure else item.role,
                topic=item.target_name if pressure else None, **base)


def probes(suite, item: CharmItem, settings, scoring: str) -> list[Probe]:
    """BA or BC, as the independent strategy asks it."""
    from .suite import ba_prompt, mcq_prompt

    if item.stage not in ("ba", "bc"):
        return []
    opts = suite.opts(settings)
    meta = suite._meta(item, settings)
    if item.stage == "ba":
        msgs = [Message(role="user", content=ba_prompt(item))]

        async def ask(ctx, stage, messages, m):
            return await suite._ba(ctx, stage, item, messages, scoring, {**meta, **m})
    else:
        msgs = [Message(role="user", content=mcq_prompt(item))]

        async def ask(ctx, stage, messages, m):
            return await suite._mcq(ctx, stage, messages, item, int(item.gold), scoring, {**meta, **m})
    return [Probe(name=item.stage, messages=msgs, plan=lambda kind: plan_for(item, kind, settings, opts), ask=ask)]


def values(recs) -> dict[str, dict]:
    """CHARM's headline figures of one (warm-up, depth), from its own single-turn metric code."""
    from .metrics import instances

    single = dm.relabel(recs, "independent", lambda r: r.meta.get("probe", r.stage.split("@")[0]))
    inst = instances(single)
    return {"BA": {r.item_id: bool(r.correct) for r in single if r.stage == "ba"},
            "BC": {r.item_id: bool(r.correct) for r in single if r.stage == "bc"},
            "C-Gap": {i["bc_id"]: i["cell"] == "compliance_gap" for i in inst},
            "R-Fail": {i["bc_id"]: i["cell"] == "recognition_failure" for i in inst}}


def compute(records) -> dict:
    return dm.compute(records, values, NAMES)
