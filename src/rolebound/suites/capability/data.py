"""capability data: roles, levels and questions (RoleCapBench, Tables 1-2).

roles.yaml holds the levels (lowest first), the roles with their curriculum ceilings and the
prompt strings; a user's file replaces it (`--set roles_file=FILE`). Questions are JSONL in our
schema, or a CSV the importer maps (`importers.py`, called by the suite).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...records import ABCD
from ...errors import InputError
from ...io import jsonl_lines, line_of, read_yaml, validate_record, validate_yaml
from ..base import Authored, interleave
from .boxed import normalize_gold

DATA_DIR = Path(__file__).resolve().parent / "data"
ROLES_FILE = DATA_DIR / "roles.yaml"
BANK_FILE = DATA_DIR / "bank.jsonl"
DIALOGUE_BANK = DATA_DIR / "dialogue.yaml"     # scripted warm-up turns at each role's own level
# The starter bank on the bundled CPU model without --limit: questions per level, so that all six
# roles x identity, injection, no-role stay within a few minutes. Other models get the whole bank;
# --set per_level=N|all overrides.
DEFAULT_PER_LEVEL = 2


def level_key(s: Any) -> str:
    return re.sub(r"[\s\-_]+", "_", str(s).strip().lower())


# -- roles and levels ----------------------------------------------------------------------------
class Level(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""


class CotSlots(BaseModel):
    """The role-specific slots of the CoT prompt (Appendix C.3)."""
    model_config = ConfigDict(extra="forbid")
    reasoning: str
    knows: str
    can_reason: str
    does_not_know: str
    ideas: str
    avoid: str


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    label: str | None = None
    article: str = "a"
    ceiling: str | None
    capability: str
    style: str
    knowledge: dict[str, str]
    cot: CotSlots
    note: str | None = None

    @model_validator(mode="after")
    def _defaults(self):
        if "default" not in self.knowledge:
            raise ValueError("knowledge needs a 'default' entry (used for subjects without a route)")
        self.label = self.label or self.name
        return self

    def knowledge_for(self, subject: str | None, routes: dict[str, str]) -> str:
        s = str(subject or "").strip().lower()
        key = routes.get(s, s)
        return (self.knowledge.get(key) or self.knowledge["default"]).strip()


class RolesConfig(Authored):
    """A roles file; its `source`/`note` say where the whole file's strings come from."""
    levels: list[Level] = Field(min_length=1)
    roles: list[Role] = Field(min_length=1)
    subject_routes: dict[str, str] = Field(default_factory=dict)

    def level_rank(self) -> dict[str, int]:
        return {lv.id: i for i, lv in enumerate(self.levels)}

    def resolve_level(self, value: Any) -> str | None:
        k = level_key(value)
        for lv in self.levels:
            if k in (level_key(lv.id), level_key(lv.name)):
                return lv.id
        return None



def _unique(entries: Sequence[Any], what: str, raw: Any, path: str | Path) -> Iterator[tuple[int, Any]]:
    """(index, entry) in order, stopping at the first id seen before."""
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if e.id in seen:
            raise InputError(f"duplicate {what} id '{e.id}'", file=str(path),
                             line=line_of(raw, [f"{what}s", i, "id"]), field=f"{what}s[{i}].id")
        seen.add(e.id)
        yield i, e


def load_roles(path: str | Path = ROLES_FILE) -> RolesConfig:
    raw = read_yaml(path)
    cfg = validate_yaml(RolesConfig, raw, file=path)
    level_ids = [lv.id for _, lv in _unique(cfg.levels, "level", raw, path)]
    for i, r in _unique(cfg.roles, "role", raw, path):
        if r.ceiling is not None:
            lid = cfg.resolve_level(r.ceiling)
            if lid is None:
                raise InputError(f"ceiling '{r.ceiling}' is not a level ({', '.join(level_ids)}) or null",
                                 file=str(path), line=line_of(raw, ["roles", i, "ceiling"]),
                                 field=f"roles[{i}].ceiling")
            r.ceiling = lid
    cfg.subject_routes = {k.strip().lower(): v for k, v in cfg.subject_routes.items()}
    return cfg


# -- items -----------------------------------------------------------------------------------------
class CapabilityItem(Authored):
    """One question: level, subject, optional passage, question, options A-D, gold letter."""
    # Extra keys are kept: the importers keep a user's other columns, and our bank has `check`.
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    level: str = Field(min_length=1)
    subject: str = Field(min_length=1)
    passage: str | None = None
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    answer: str

    @field_validator("id", "level", "subject", mode="before")
    @classmethod
    def _str(cls, v):
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "answer" not in data and "gold" in data:
            data["answer"] = data.pop("gold")
        opts = data.get("options")
        if isinstance(opts, dict):
            keys = sorted(opts)
            if [k.strip().upper() for k in keys] != list(ABCD):
                raise ValueError("options as a mapping need exactly the keys A, B, C, D")
            data["options"] = [str(opts[k]) for k in keys]
            opts = data["options"]
        ans = data.get("answer")
        if isinstance(ans, str) and isinstance(opts, list):
            g = normalize_gold(ans)
            if g not in ABCD and ans.strip() in [str(o).strip() for o in opts]:
                g = ABCD[[str(o).strip() for o in opts].index(ans.strip())]
            data["answer"] = g
        return data

    @field_validator("answer")
    @classmethod
    def _letter(cls, v: str) -> str:
        if v not in ABCD:
            raise ValueError(f"answer must be one of A, B, C, D (or an option's exact text), not {v!r}")
        return v

    @field_validator("options")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if any(not str(o).strip() for o in v):
            raise ValueError("options must not be empty")
        if len({str(o).strip() for o in v}) != 4:
            raise ValueError("the four options must differ")
        return v


def read_items(path: str | Path, rows: list | None = None) -> list[tuple[int, CapabilityItem]]:
    """(line, item) from our JSONL schema, or from the (line, dict) rows an importer mapped from
    another format (the suite passes a CSV's; data never imports the importers)."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if rows is None:
        rows = list(jsonl_lines(path))
    return [(ln, validate_record(CapabilityItem, obj, file=path, line=ln)) for ln, obj in rows]


def load_items(path: str | Path, cfg: RolesConfig, rows: list | None = None) -> list[CapabilityItem]:
    """The questions of a file, each level resolved against the roles file's levels."""
    rows = read_items(path, rows)
    if not rows:
        raise InputError("no items in the file", file=str(path))
    seen: dict[str, int] = {}
    items = []
    for ln, it in rows:
        lid = cfg.resolve_level(it.level)
        if lid is None:
            raise InputError(f"level '{it.level}' is not one of: "
                             + ", ".join(f"{lv.id} ({lv.name})" for lv in cfg.levels),
                             file=str(path), line=ln, field="level")
        if it.id in seen:
            raise InputError(f"duplicate id '{it.id}' (first on line {seen[it.id]})", file=str(path),
                             line=ln, field="id")
        seen[it.id] = ln
        it.level = lid
        items.append(it)
    return items


def run_roles(settings, opts) -> RolesConfig:
    """The run's roles file and chosen roles, in its state (read once per run)."""
    st = settings.state
    if st.cfg is None:
        path = opts.roles_file or ROLES_FILE
        if not Path(path).exists():
            raise InputError("roles file not found", file=str(path), field="roles_file")
        st.cfg = load_roles(path)
        st.roles = pick_roles(st.cfg, opts.roles)
    return st.cfg


def role_ids(value: Any) -> list[str] | None:
    """The `roles` option as role ids; None: every role."""
    if value in (None, "", "all"):
        return None
    ids = value if isinstance(value, list) else str(value).split(",")
    return [str(x).strip() for x in ids if str(x).strip()]


def pick_roles(cfg: RolesConfig, value: Any) -> list[Role]:
    allr = cfg.roles
    ids = role_ids(value)
    if ids is None:
        return list(allr)
    byid = {r.id: r for r in allr}
    if not ids:
        raise InputError(f"no role given; roles: {', '.join(byid)}", field="--set roles")
    bad = [x for x in ids if x not in byid]
    if bad:
        raise InputError(f"unknown role '{bad[0]}'; roles: {', '.join(byid)}", field="--set roles")
    return [r for r in allr if r.id in ids]   # keep the ladder's order


def select_items(items: Sequence[CapabilityItem], limit: int | None, cfg: RolesConfig | None,
                 cap: int | None) -> list[CapabilityItem]:
    """Balanced: round-robin over levels, and over subjects inside each level; at most `cap`
    questions per level (the run's per_level, which load() puts in its state)."""
    ranks = cfg.level_rank() if cfg is not None else {}
    by_level: dict[str, list] = {}
    for it in items:
        by_level.setdefault(it.level, []).append(it)
    per_level = []
    for k, lv in enumerate(sorted(by_level, key=lambda k: ranks.get(k, 99))):
        subj: dict[str, list] = {}
        for it in by_level[lv]:
            subj.setdefault(it.subject, []).append(it)
        names = sorted(subj)
        names = names[k % len(names):] + names[: k % len(names)]   # each level starts on another subject
        order = interleave([subj[s] for s in names])
        per_level.append(order[:cap] if cap else order)
    out = interleave(per_level)
    return out[:limit] if limit else out


def stats_tables(dataset) -> list[tuple[str, Any]]:
    import pandas as pd

    cfg = dataset.extra["roles"]
    df = pd.DataFrame([{"level": it.level, "subject": it.subject, "answer": it.answer,
                        "passage": bool(it.passage)} for it in dataset.items])
    order = [lv.id for lv in cfg.levels if lv.id in set(df["level"])]
    counts = pd.crosstab(df["level"], df["subject"], margins=True, margins_name="total")
    counts = counts.reindex(order + ["total"])
    letters = pd.crosstab(df["level"], df["answer"]).reindex(order)
    ranks = cfg.level_rank()
    roles = pd.DataFrame([{
        "role": r.id, "prompt name": r.name,
        "ceiling": r.ceiling or "none in benchmark",
        "in-role levels": ", ".join(lv.id for lv in cfg.levels
                                    if r.ceiling is not None and ranks[lv.id] <= ranks[r.ceiling]) or "-",
        "in-role items": sum(1 for it in dataset.items
                             if r.ceiling is not None and ranks[it.level] <= ranks[r.ceiling]),
    } for r in cfg.roles]).set_index("role")
    return [("Items by level and subject", counts), ("Gold letters by level", letters),
            ("Roles and ceilings (Tables 1-2)", roles)]
