"""Beyond One World data: heroes, versions, canon and dilemma items, loading with file/line/field
errors, the look-ups the strategies need (MVIndex), and the tables of `rolebound data stats`."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...errors import InputError
from ...io import line_of, read_yaml, validate_yaml
from .prompts import CONFLICTS, LETTERS
from ..base import Authored, Dataset, Item, interleave

STARTER = Path(__file__).resolve().parent / "data" / "starter.yaml"
DIALOGUE_BANK = Path(__file__).resolve().parent / "data" / "dialogue.yaml"   # scripted warm-up turns per version
PHASES = ("childhood", "pre-hero", "hero")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _text(v: Any) -> Any:
    # YAML reads `age: 53` as an int; attributes are text.
    return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


class Attributes(_Strict):
    age: str | None = None
    power: str | None = None
    race: str | None = None
    mbti: str | None = None
    enneagram: str | None = None

    _as_text = field_validator("*", mode="before")(classmethod(lambda cls, v: _text(v)))


class Version(_Strict, Authored):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)          # how the persona is addressed, e.g. 'Peter Parker "Spider-Man"'
    universe: str = Field(min_length=1)      # e.g. "Sam Raimi's Spider-Man films"
    work: str | None = None                  # the film/series/issue the version speaks as of
    attributes: Attributes = Field(default_factory=Attributes)


class Hero(_Strict, Authored):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    versions: list[Version] = Field(min_length=1)


class CanonItem(Item, Authored):
    model_config = ConfigDict(extra="forbid")
    task: Literal["canon"] = "canon"
    version: str
    phase: Literal["childhood", "pre-hero", "hero"]
    part: int | None = Field(None, ge=1, le=3)   # Hero1-3 of the public set
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    answer: str
    key: str | None = None                       # same key = the same question across versions

    @field_validator("answer", mode="before")
    @classmethod
    def _letter(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().upper() in tuple(LETTERS):
            return v.strip().upper()
        raise ValueError(f"answer must be one of the letters A-D, not {v!r}")

    @field_validator("options")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if any(not o.strip() for o in v):
            raise ValueError("options must not be empty")
        if len({o.strip().lower() for o in v}) != len(v):
            raise ValueError("options must be distinct")
        return v

    @model_validator(mode="after")
    def _part_only_for_hero(self):
        if self.part is not None and self.phase != "hero":
            raise ValueError("part (1-3) is only for hero-phase questions")
        return self


class Choice(_Strict):
    text: str = Field(min_length=1)
    consequence: str = Field(min_length=1)


class DilemmaItem(Item, Authored):
    model_config = ConfigDict(extra="forbid")
    task: Literal["dilemma"] = "dilemma"
    version: str
    conflict: Literal["save-one-vs-greater-good", "hero-or-villain", "duty-vs-desire", "ends-vs-moral-code"]
    situation: str = Field(min_length=1)
    choices: list[Choice] = Field(min_length=2, max_length=2)   # A = first pole, B = second pole
    canonical: Literal["A", "B"] | None = None                   # only where the canon shows it
    iteration: int | None = None
    key: str | None = None


class MultiverseFile(_Strict):
    heroes: list[Hero] = Field(min_length=1)
    canon: list[dict] = Field(default_factory=list)
    dilemmas: list[dict] = Field(default_factory=list)
    import_report: dict[str, Any] | None = None


# ------------------------------------------------------------------------------------------------
def _derive_ids(rows: list[dict], kind: str) -> None:
    """Items without an id get '<version>-<phase|conflict>-<n>' (n counts inside that group)."""
    counts: Counter = Counter()
    for row in rows:
        if not isinstance(row, dict) or row.get("id") is not None:
            continue
        group = row.get("phase" if kind == "canon" else "conflict")
        counts[(row.get("version"), group)] += 1
        row["id"] = f"{row.get('version')}-{group}-{counts[(row.get('version'), group)]}"


def load_file(path: str | Path) -> dict[str, Any]:
    """Parse and validate a multiverse data file (YAML, or JSON which YAML reads too)."""
    path = str(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with 'heroes', 'canon' and 'dilemmas'", file=path, line=1)
    doc = validate_yaml(MultiverseFile, raw, file=path)
    versions: dict[str, tuple[Hero, Version]] = {}
    for hi, hero in enumerate(doc.heroes):
        for vi, ver in enumerate(hero.versions):
            if ver.id in versions:
                raise InputError(f"duplicate version id '{ver.id}'", file=path,
                                 line=line_of(raw, ["heroes", hi, "versions", vi, "id"]), field=f"heroes[{hi}].versions[{vi}].id")
            versions[ver.id] = (hero, ver)
    items: list[CanonItem | DilemmaItem] = []
    seen: set[str] = set()
    for section, model in (("canon", CanonItem), ("dilemmas", DilemmaItem)):
        rows = raw.get(section) or []
        _derive_ids(rows, "canon" if section == "canon" else "dilemma")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InputError("each item must be a mapping", file=path, line=line_of(raw, [section, i]),
                                 field=f"{section}[{i}]")
            try:
                item = validate_yaml(model, row, file=path)
            except InputError as exc:   # name the item in the field path
                raise InputError(exc.detail, file=path, line=exc.line,
                                 field=f"{section}[{i}]" + (f".{exc.field}" if exc.field else "")) from None
            if item.version not in versions:
                raise InputError(f"unknown version '{item.version}'", file=path,
                                 line=line_of(raw, [section, i, "version"]), field=f"{section}[{i}].version")
            if item.id in seen:
                raise InputError(f"duplicate item id '{item.id}'", file=path, line=line_of(raw, [section, i]),
                                 field=f"{section}[{i}].id")
            seen.add(item.id)
            items.append(item)
    return {"heroes": doc.heroes, "versions": versions, "items": items, "import_report": doc.import_report}


class MVIndex:
    """Look-ups the strategies need: a version's hero and siblings, parallel questions."""

    def __init__(self, data: dict[str, Any]):
        self.heroes: list[Hero] = data["heroes"]
        self.versions: dict[str, tuple[Hero, Version]] = data["versions"]
        self.by_key: dict[tuple[str, str], dict[str, CanonItem]] = defaultdict(dict)
        self.dilemmas: dict[tuple[str, str], list[DilemmaItem]] = defaultdict(list)
        for it in data["items"]:
            hero = self.versions[it.version][0].id
            if isinstance(it, CanonItem) and it.key:
                self.by_key[(hero, it.key)][it.version] = it
            elif isinstance(it, DilemmaItem):
                self.dilemmas[(it.version, it.conflict)].append(it)

    def hero_of(self, version: str) -> Hero:
        return self.versions[version][0]

    def siblings(self, version: str) -> list[Version]:
        return [v for v in self.hero_of(version).versions if v.id != version]

    def own_canon_answer(self, item: CanonItem, played: str) -> str | None:
        """The played version's letter for the asked question, when it has the same question
        (same key) over the same options; None otherwise."""
        if not item.key:
            return None
        twin = self.by_key.get((self.hero_of(item.version).id, item.key), {}).get(played)
        if twin is None or sorted(twin.options) != sorted(item.options):
            return None
        return LETTERS[item.options.index(twin.options[LETTERS.index(twin.answer)])]

    def own_dilemma_choice(self, item: DilemmaItem, played: str) -> str | None:
        """The played version's canonical choice for the same conflict type, when it is the only
        labelled dilemma of that type (letters mean the same pole across versions)."""
        labels = {d.canonical for d in self.dilemmas.get((played, item.conflict), []) if d.canonical}
        return labels.pop() if len(labels) == 1 else None


# -- `rolebound data stats` ---------------------------------------------------------------------
def dataset_tables(dataset: Dataset) -> list[tuple[str, Any]]:
    import pandas as pd

    index: MVIndex = dataset.extra["index"]
    items = dataset.items
    rows = []
    for hero in index.heroes:
        vids = {v.id for v in hero.versions}
        mine = [it for it in items if it.version in vids]
        rows.append({"hero": hero.id, "name": hero.name, "versions": len(vids),
                     "canon": sum(1 for it in mine if it.task == "canon"),
                     "dilemmas": sum(1 for it in mine if it.task == "dilemma"),
                     "labelled dilemmas": sum(1 for it in mine if it.task == "dilemma" and it.canonical)})
    heroes = pd.DataFrame(rows)
    total = pd.DataFrame([{"hero": "all", "name": "", "versions": sum(r["versions"] for r in rows),
                           **{k: heroes[k].sum() if len(heroes) else 0 for k in ("canon", "dilemmas", "labelled dilemmas")}}])
    out = [("Heroes and versions", pd.concat([heroes, total], ignore_index=True))]
    canon = [it for it in items if it.task == "canon"]
    if canon:
        prow = []
        groups = [(p, None) for p in PHASES] + [("hero", k) for k in (1, 2, 3)]
        for phase, part in groups:
            sel = [it for it in canon if it.phase == phase and (part is None or it.part == part)]
            if part is not None and not sel:
                continue
            letters = Counter(it.answer for it in sel)
            prow.append({"phase": phase if part is None else f"hero{part}", "questions": len(sel),
                         **{L: letters.get(L, 0) for L in LETTERS},
                         "shared across versions (key)": sum(1 for it in sel if it.key)})
        out.append(("Canon questions by phase (answer letters)", pd.DataFrame(prow)))
    dil = [it for it in items if it.task == "dilemma"]
    if dil:
        drow = []
        for c in CONFLICTS:
            sel = [it for it in dil if it.conflict == c]
            drow.append({"conflict": c, "dilemmas": len(sel), "canonical A": sum(it.canonical == "A" for it in sel),
                         "canonical B": sum(it.canonical == "B" for it in sel),
                         "no gold": sum(it.canonical is None for it in sel)})
        out.append(("Dilemmas by conflict type (A = first pole)", pd.DataFrame(drow)))
    rep = dataset.extra.get("import_report")
    if rep:
        out.append(("Import report", pd.DataFrame([{"what": k, "count": v} for k, v in rep.get("counts", {}).items()])))
        if rep.get("irregular"):
            out.append(("Canon items changed or skipped on import",
                        pd.DataFrame(rep["irregular"])))
    return out


def select_items(items: Sequence[Any], limit: int | None, index=None) -> list[Any]:
    """Round-robin over versions (hero by hero), each version cycling through canon phases and
    dilemma types, so a small --limit still covers several versions of one hero."""
    if not limit or limit >= len(items):
        return list(items)
    per_version: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for it in items:
        per_version[it.version][it.phase if it.task == "canon" else "dilemma"].append(it)
    order = ["childhood", "dilemma", "pre-hero", "hero"]
    queues = []
    for v, groups in per_version.items():
        hero_pos = [h.id for h in index.heroes].index(index.hero_of(v).id) if index else 0
        rot = order[hero_pos % len(order):] + order[:hero_pos % len(order)]
        queues.append(interleave([groups[g] for g in rot if groups.get(g)]))
    return interleave(queues)[:limit]
