"""CHARM data: regions, characters, modern concepts and target facts, and their expansion into
BA / BC / KV questions (Section 2, Table 7).

Regions and characters are data: a user's YAML file adds characters, facts and whole regions.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter, defaultdict
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..base import Authored
from ...errors import InputError
from ...io import line_of, read_yaml, stable_hash, validate_yaml

ABSTAIN = "I cannot answer that question"


def slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.strip().lower()).strip("-")


def is_abstain(text: str) -> bool:
    """The abstention option as ours ("I cannot ...") or the authors' release ("I can not ... .") writes it."""
    return text.strip().rstrip(".").lower().replace("can not", "cannot") == ABSTAIN.lower()

# Cross-universe awareness: "whether the role character knows, has met, or has heard of the target"
# (Section 2). Rotated across pairs; a data file may replace them (key `cross_ba_templates`).
CROSS_BA_TEMPLATES = ["Do you know {target}?", "Have you ever met {target}?", "Have you heard of {target}?"]


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Region(_Base):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    note: str | None = None


class Character(_Base, Authored):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    region: str
    profile: str = Field(min_length=1)
    reality: Literal["real", "fiction"]
    period: Literal["historical", "contemporary"]
    era_end: int | None = None        # last year of a historical character's world
    known_since: int | None = None    # a contemporary target: the year it became widely known
    universe: str = Field(min_length=1)

    @model_validator(mode="after")
    def _era(self):
        if self.period == "historical" and self.era_end is None:
            raise ValueError("a historical character needs era_end (the last year of its world)")
        return self


def _three_distinct(answer: str, distractors: list[str]) -> list[str]:
    if len(distractors) != 3:
        raise ValueError(f"needs exactly 3 distractors, got {len(distractors)}")
    seen = {answer.strip().lower()}
    for d in distractors:
        key = d.strip().lower()
        if not key:
            raise ValueError("a distractor is empty")
        if key in seen:
            raise ValueError(f"distractor {d!r} repeats the answer or another distractor")
        seen.add(key)
    return distractors


class _Question(_Base, Authored):
    """What a concept and a fact share: the answer, three distinct distractors, provenance."""

    id: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    distractors: list[str]

    @model_validator(mode="after")
    def _check(self):
        _three_distinct(self.answer, self.distractors)
        return self


class Concept(_Question):
    name: str = Field(min_length=1)
    year: int
    ba_templates: list[str] = Field(min_length=1)
    bc_question: str = Field(min_length=1)


class Fact(_Question):
    target: str
    bc_question: str = Field(min_length=1)   # third person, names the target
    kv_question: str = Field(min_length=1)   # the same fact asked to the target


class CharmData(_Base):
    regions: list[Region] = Field(default_factory=list)
    characters: list[Character] = Field(default_factory=list)
    concepts: list[Concept] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    cross_ba_templates: list[str] | None = None

    @field_validator("cross_ba_templates")
    @classmethod
    def _templates(cls, v):
        if v is not None and (not v or any("{target}" not in t for t in v)):
            raise ValueError("each cross_ba_template must contain {target}")
        for t in v or []:       # filled by str.format: {target} is the only field it may name
            try:
                fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(t) if f is not None]
            except ValueError as exc:
                raise ValueError(f"{t!r}: {exc}; write a literal brace as {{{{ or }}}}") from None
            if any(f != "target" or spec or conv for f, spec, conv in fields):
                raise ValueError(f"{t!r}: the only field a cross_ba_template may hold is {{target}}")
        return v


class CharmItem(_Base):
    """One question: BA (Yes/No), BC (5-choice with abstention) or KV (5-choice, asked as target)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    stage: Literal["ba", "bc", "kv"]
    boundary: Literal["temporal", "cross"]
    role: str                  # character answering (KV: the target)
    role_name: str
    profile: str
    region: str
    target: str                # concept id or target character id
    target_name: str
    fact: str | None = None
    question: str
    options: list[str] | None = None
    gold: str | int            # "No" for BA; 1-based option for BC (abstention) and KV (fact)
    fact_option: int | None = None
    answer: str | None = None  # the factual answer text
    ba_id: str | None = None   # BC: the paired awareness question
    ba_question: str | None = None
    kv_id: str | None = None   # cross BC: its verification question
    bc_id: str | None = None   # KV: the cross BC question it verifies (same options, same order)
    template: int | None = None
    source: str | None = None  # an imported release: the file and JSON path the question comes from
    note: str | None = None    # what of it is ours (an imported release)

    def meta(self) -> dict[str, Any]:
        return {"stage": self.stage, "boundary": self.boundary, "role": self.role, "region": self.region,
                "target": self.target, "fact": self.fact, "fact_option": self.fact_option,
                "ba_id": self.ba_id, "kv_id": self.kv_id}


# The BA Yes control (ours): in-boundary awareness questions, in the paper's BA forms, whose answer is Yes
_BA_FORM = re.compile(r"^(Do you know|Have you ever met|Have you heard of|Have you ever used) .+\?$")


class YesQuestion(_Base, Authored):
    id: str = Field(min_length=1)
    question: str = Field(min_length=1)

    @field_validator("question")
    @classmethod
    def _form(cls, v):
        if not _BA_FORM.match(v):
            raise ValueError("ask it in a BA form: 'Do you know ...?', 'Have you ever met ...?', "
                             "'Have you heard of ...?'")
        return v


class BAControl(Authored):
    roles: dict[str, list[YesQuestion]]


def load_ba_control() -> BAControl:
    """data/ba_control.yaml: each historical role's Yes questions, by role id."""
    path = Path(str(resources.files(__package__) / "data" / "ba_control.yaml"))
    return validate_yaml(BAControl, read_yaml(path), file=path)


# -- loading ----------------------------------------------------------------------------------
def builtin_files() -> list[Path]:
    root = resources.files(__package__) / "data"
    return [Path(str(root / n)) for n in ("regions.yaml", "characters.yaml", "concepts.yaml", "facts.yaml")]


def _load_file(path: Path) -> tuple[CharmData, Any]:
    raw = read_yaml(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with regions/characters/concepts/facts", file=str(path), line=1)
    return validate_yaml(CharmData, raw, file=path), raw


def load_data(user_files: list[str | Path] | None = None, *, builtin: bool = True) -> tuple[CharmData, list[str]]:
    """Merge the starter files (unless builtin=False) with user files; check every reference."""
    merged = CharmData()
    sources: list[str] = []
    where: dict[tuple[str, str], tuple[Path, Any, int]] = {}   # (kind, id) -> (file, raw, index)
    files = (builtin_files() if builtin else []) + [Path(p) for p in (user_files or [])]
    templates = None
    for path in files:
        data, raw = _load_file(path)
        sources.append(str(path))
        for kind in ("regions", "characters", "concepts", "facts"):
            for i, obj in enumerate(getattr(data, kind)):
                key = (kind, obj.id)
                if key in where:
                    first = where[key][0]
                    raise InputError(f"duplicate {kind[:-1]} id '{obj.id}' (first defined in {first})",
                                     file=str(path), line=line_of(raw, (kind, i, "id")), field=f"{kind}[{i}].id")
                where[key] = (path, raw, i)
                getattr(merged, kind).append(obj)
        if data.cross_ba_templates:
            templates = data.cross_ba_templates
    merged.cross_ba_templates = templates
    _check_refs(merged, where)
    return merged, sources


def _check_refs(d: CharmData, where) -> None:
    regions = {r.id for r in d.regions}
    chars = {c.id: c for c in d.characters}

    def fail(kind, obj, field, msg):
        path, raw, i = where[(kind, obj.id)]
        raise InputError(msg, file=str(path), line=line_of(raw, (kind, i, field)), field=f"{kind}[{i}].{field}")

    for c in d.characters:
        if c.region not in regions:
            fail("characters", c, "region", f"unknown region '{c.region}'; known: {', '.join(sorted(regions))}")
    for f in d.facts:
        t = chars.get(f.target)
        if t is None:
            fail("facts", f, "target", f"unknown character '{f.target}'")
        if t.period != "contemporary":
            fail("facts", f, "target", f"'{f.target}' is historical; facts are about contemporary targets")


# -- expansion (Section 2, Table 7) -----------------------------------------------------------
def _options(answer: str, distractors: list[str], abstain_pos: int, rng: random.Random) -> tuple[list[str], int]:
    """Shuffle fact + distractors, then put the abstention option at abstain_pos (0-based)."""
    opts = [answer] + list(distractors)
    rng.shuffle(opts)
    opts.insert(abstain_pos, ABSTAIN)
    return opts, opts.index(answer) + 1


def expand(d: CharmData, seed: int = 0) -> tuple[list[CharmItem], dict[str, int]]:
    """All BA, BC and KV questions. The abstention option's position cycles through 1..5 over the
    BC questions, the rest are shuffled with `seed`; each Cross-Universe BC question has its own KV
    question with the same options. Pairs that are no boundary (a concept not later than the
    role's era_end; a target known_since no later than it) are skipped and counted."""
    rng = random.Random(seed)
    regions = [r.id for r in d.regions]
    hist = {r: [c for c in d.characters if c.region == r and c.period == "historical"] for r in regions}
    cont = {r: [c for c in d.characters if c.region == r and c.period == "contemporary"] for r in regions}
    facts_of: dict[str, list[Fact]] = {}
    for f in d.facts:
        facts_of.setdefault(f.target, []).append(f)
    cross_t = d.cross_ba_templates or CROSS_BA_TEMPLATES
    items: list[CharmItem] = []
    skipped = skipped_cross = 0
    n_bc = 0
    for region in regions:
        for hi, role in enumerate(hist[region]):
            base = dict(role=role.id, role_name=role.name, profile=role.profile, region=region)
            # Temporal: historical role x modern concept
            for ci, concept in enumerate(d.concepts):
                if concept.year <= (role.era_end or 0):
                    skipped += 1          # not a boundary for this character
                    continue
                t = hi % len(concept.ba_templates)      # alternate templates across characters
                ba_id = f"ba/temporal/{role.id}/{concept.id}"
                items.append(CharmItem(id=ba_id, stage="ba", boundary="temporal", target=concept.id,
                                       target_name=concept.name, question=concept.ba_templates[t],
                                       gold="No", template=t, **base))
                opts, fact_pos = _options(concept.answer, concept.distractors, n_bc % 5, rng)
                n_bc += 1
                items.append(CharmItem(id=f"bc/temporal/{role.id}/{concept.id}", stage="bc", boundary="temporal",
                                       target=concept.id, target_name=concept.name, question=concept.bc_question,
                                       options=opts, gold=opts.index(ABSTAIN) + 1, fact_option=fact_pos,
                                       answer=concept.answer, ba_id=ba_id,
                                       ba_question=concept.ba_templates[t], **base))
            # Cross-universe: historical role x contemporary target of the same region; a target
            # already known inside the role's years is no boundary (as a concept is for Temporal)
            for ti, target in enumerate(cont[region]):
                if target.known_since is not None and target.known_since <= (role.era_end or 0):
                    skipped_cross += 1
                    continue
                t = (hi + ti) % len(cross_t)
                ba_id = f"ba/cross/{role.id}/{target.id}"
                items.append(CharmItem(id=ba_id, stage="ba", boundary="cross", target=target.id,
                                       target_name=target.name, question=cross_t[t].format(target=target.name),
                                       gold="No", template=t, **base))
                for fact in facts_of.get(target.id, []):
                    opts, fact_pos = _options(fact.answer, fact.distractors, n_bc % 5, rng)
                    n_bc += 1
                    kv_id = f"kv/{role.id}/{fact.id}"
                    items.append(CharmItem(id=f"bc/cross/{role.id}/{fact.id}", stage="bc", boundary="cross",
                                           target=target.id, target_name=target.name, fact=fact.id,
                                           question=fact.bc_question, options=opts, gold=opts.index(ABSTAIN) + 1,
                                           fact_option=fact_pos, answer=fact.answer, ba_id=ba_id,
                                           ba_question=cross_t[t].format(target=target.name),
                                           kv_id=kv_id, **base))
                    # Knowledge verification: one per Cross-Universe BC question, asked as the
                    # target with the BC question's options in the same order (Tables 7 and 11)
                    items.append(CharmItem(id=kv_id, stage="kv", boundary="cross", role=target.id,
                                           role_name=target.name, profile=target.profile, region=target.region,
                                           target=target.id, target_name=target.name, fact=fact.id,
                                           question=fact.kv_question, options=list(opts), gold=fact_pos,
                                           fact_option=fact_pos, answer=fact.answer, bc_id=f"bc/cross/{role.id}/{fact.id}"))
    return items, {"skipped_pairs": skipped, "skipped_cross_pairs": skipped_cross}


def data_hash(d: CharmData, seed: int) -> str:
    return stable_hash({"data": d.model_dump(), "seed": seed})


def select(items, limit):
    """Keep whole instances: BC questions taken round-robin over (region, boundary), plus the
    BA and KV questions they pair with, until about `limit` questions. Within a group the BC
    questions are taken in `spread` order, so that a small limit covers many targets and roles
    (the units the design repeats, over which the CIs resample) rather than one role's first."""
    if not limit or limit >= len(items):
        return list(items)
    by_id = {i.id: i for i in items}
    groups: dict[tuple, list] = defaultdict(list)
    for i in items:
        if i.stage == "bc":
            groups[(i.region, i.boundary)].append(i)
    keep: set[str] = set()
    keys = sorted(groups)
    # each boundary's groups (regions) start on their own share of the targets
    queues = [spread(groups[g], [k for k in keys if k[1] == g[1]].index(g) / sum(k[1] == g[1] for k in keys))
              for g in keys]
    while len(keep) < limit and any(queues):
        for q in queues:
            if not q or len(keep) >= limit:
                continue
            bc = q.pop(0)
            keep.update(x for x in (bc.id, bc.ba_id, bc.kv_id) if x and x in by_id)
    return [i for i in items if i.id in keep]


def spread(bcs: list, shift: float = 0.0) -> list:
    """One (region, boundary) group's BC questions in the order a limit takes them: each target
    paired with one role of its own (the roles taken in turn, skipping a role that has no question
    on it), its questions round-robin over those pairs, then every other question in the data's
    order. The targets' order is rotated by the share `shift` (the group's place among its
    boundary's regions), so that regions sharing the temporal concepts start on different ones. A
    pair shares its BA question, so the first pass costs one BA per target and adds no other."""
    roles = list(dict.fromkeys(i.role for i in bcs))
    targets = list(dict.fromkeys(i.target for i in bcs))
    if targets:
        k = int(shift * len(targets)) % len(targets)
        targets = targets[k:] + targets[:k]
    pairs: dict[tuple, list] = defaultdict(list)
    for i in bcs:
        pairs[(i.role, i.target)].append(i)
    first = []
    for t, target in enumerate(targets):
        role = next((roles[(t + j) % len(roles)] for j in range(len(roles))
                     if (roles[(t + j) % len(roles)], target) in pairs), None)
        first.append(pairs[(role, target)])
    taken = [i for n in range(max(map(len, first), default=0)) for qs in first if n < len(qs) for i in [qs[n]]]
    ids = {i.id for i in taken}
    return taken + [i for i in bcs if i.id not in ids]


def stats_tables(dataset) -> list[tuple[str, Any]]:
    import pandas as pd

    rows = defaultdict(Counter)
    for i in dataset.items:
        col = {"ba": "BA", "bc": "BC", "kv": "KV"}[i.stage] + " " + ("Temp" if i.boundary == "temporal" else "Cross")
        rows[i.region][col] += 1
    cols = ["BA Temp", "BA Cross", "BC Temp", "BC Cross", "KV Cross"]
    df = pd.DataFrame([[rows[r][c] for c in cols] for r in rows], index=list(rows), columns=cols)
    df["Total"] = df.sum(axis=1)
    df.loc["Total"] = df.sum(axis=0)
    df.index.name = "Region"
    d = dataset.extra["data"]
    chars = pd.DataFrame([{"region": c.region, "period": c.period, "reality": c.reality} for c in d.characters])
    by_char = chars.groupby(["region", "period", "reality"]).size().unstack(fill_value=0) if len(chars) else chars
    tables = [("Table 7: questions by region, boundary type and question type", df),
              ("Characters by region, period and reality status", by_char)]
    facts = Counter(f.target for f in d.facts)
    cont = [c for c in d.characters if c.period == "contemporary"]
    tables.append(("Target facts per contemporary character",
                   pd.DataFrame({"region": [c.region for c in cont], "facts": [facts[c.id] for c in cont]},
                                index=pd.Index([c.name for c in cont], name="character"))))
    if dataset.extra.get("skipped_pairs") or dataset.extra.get("skipped_cross_pairs"):
        tables.append(("Skipped pairs (no boundary: the concept or target is known inside the role's years)",
                       pd.DataFrame({"temporal (concept year <= era_end)": [dataset.extra.get("skipped_pairs", 0)],
                                     "cross-universe (target known_since <= era_end)":
                                         [dataset.extra.get("skipped_cross_pairs", 0)]})))
    return tables


def dialogue_bank() -> Path:
    """The scripted warm-up turns of the dialogue strategy (in-era, in-life questions per role)."""
    return Path(str(resources.files(__package__) / "data" / "dialogue.yaml"))


def dialogue_probes(items):
    """A dialogue-only run asks BA and BC (no KV), so --limit counts those probes."""
    return [i for i in items if i.stage in ("ba", "bc")]
