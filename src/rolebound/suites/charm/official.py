"""Import the CHARM authors' own release (github.com/nahyeon00/Character-Hallucination-Benchmark).

    rolebound data import charm-official ../shared/data/external/charm-official --out charm-official.jsonl
    rolebound run charm --data charm-official.jsonl

The release is read where it lies and never copied into the package (it states no license). Its
questions, their five options, the options' order and the gold answers are kept as written, but for
the leading and trailing spaces of some strings (stripped, and counted among the departures); every
question passes through the suite's CharmItem. In the paper's terms:
- test_data/temporal_mc.json (30 MCQs) asked of each of the 20 historical characters: BC Temporal (600);
- test_data/cross_mc.json: per historical character, "Do you know / Have you met / Have you heard of
  X?" items (80) are BA Cross, asked as Table 19's Yes/No (the release writes them as MCQs); the
  others (732) are BC Cross, in blocks by target; `real_fact` is the factual option;
- test_data/fact_mc.json: the contemporary targets' first-person facts, asked as the target, once per
  historical character of the region: KV (184 facts x 4 = 736). A BC question pairs with the target's
  facts in order; a fact the release repeats (same question and answer) has no BC partner;
- source_data/meta_character.json: the 40 characters of the five regions (the Mexican ones left out).
Ours, and marked so: the BA Temporal questions (data/release_concepts.yaml names the concept behind
each temporal question). Errors name the release file, the JSON path and the field.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..base import Authored
from ...errors import InputError
from ...importers import writes
from ...io import atomic_path, expected, inside, json_loads, read_yaml, validate_yaml
from .data import CharmItem, Region, is_abstain, slug
from .release import FORMAT, Header, Profile, Provenance, differences_from_paper, load_release, write_release

REPO = "github.com/nahyeon00/Character-Hallucination-Benchmark"
COMMIT = "f8129c9a8b268c01337a7108a87ca79c5ffd8e8b"     # the release this importer was written against
REGIONS = {"en": ("EN", "English-speaking (US/UK)"), "china": ("China", "China"), "korea": ("Korea", "South Korea"),
           "spain": ("Spain", "Spain"), "indonesia": ("Indonesia", "Indonesia")}
META, TEMPORAL, CROSS, FACT = ("source_data/meta_character.json", "test_data/temporal_mc.json",
                               "test_data/cross_mc.json", "test_data/fact_mc.json")
CONCEPTS = "release_concepts.yaml"
OPTION_KEYS = ("one", "two", "three", "four", "five")
_BA = re.compile(r"^(Do you know|Have you met|Have you heard of)\b")


class ReleaseMCQ(BaseModel):
    """One MCQ record of the release: {Question, Answer, True Label, one..five[, real_fact]}."""

    model_config = ConfigDict(str_strip_whitespace=True)
    Question: str = Field(min_length=1)
    Answer: str = Field(min_length=1)
    label: int = Field(alias="True Label", ge=1, le=5)
    one: str = Field(min_length=1)
    two: str = Field(min_length=1)
    three: str = Field(min_length=1)
    four: str = Field(min_length=1)
    five: str = Field(min_length=1)
    real_fact: str | None = None

    @property
    def options(self) -> list[str]:
        return [getattr(self, k) for k in OPTION_KEYS]


class ReleaseCharacter(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    name: str = Field(min_length=1)
    profile: str = Field(min_length=1)
    history: Literal["real", "fiction", "fictional"]
    time: Literal["past", "present"]


class ConceptLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=1)
    id: str = Field(min_length=1)
    match: str = Field(min_length=1)
    ba_question: str = Field(min_length=1)


class ConceptMap(Authored):
    concepts: list[ConceptLine]


# -- reading, with errors that name the file, the JSON path and the field ------------------------
def _jpath(*keys) -> str:
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f"[{json.dumps(k, ensure_ascii=False)}]" for k in keys)


class _Release:
    def __init__(self, root: Path):
        self.root = root
        self.stripped = self.asked = 0      # question and option strings read, and those with outer spaces

    def file(self, rel: str) -> str:
        return str(self.root / rel)

    def read(self, rel: str, kind: type) -> Any:
        path = self.root / rel
        if not path.is_file():
            raise InputError("missing from the release folder", file=str(path))
        try:
            data = json_loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path), line=exc.lineno) from None
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=str(path)) from None
        self.expect(data, kind, rel, ())
        return data

    def expect(self, value, kind: type, rel: str, keys: tuple, field: str | None = None):
        if not isinstance(value, kind):
            what = {dict: "an object", list: "a list"}[kind]
            raise InputError(f"at {_jpath(*keys)}: expected {what}, got {type(value).__name__}",
                             file=self.file(rel), field=field)
        return value

    def fail(self, rel: str, keys: tuple, field: str, msg: str):
        raise InputError(f"at {_jpath(*keys)}: {msg}", file=self.file(rel), field=field)

    def item(self, rel: str, keys: tuple, **fields) -> CharmItem:
        """A question through the suite's model (a value it cannot ask stops the import here)."""
        try:
            return CharmItem(source=f"{rel} {_jpath(*keys)}", **fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            self.fail(rel, keys, ".".join(str(x) for x in err.get("loc") or ()), expected(err, err["msg"]))

    def model(self, model: type[BaseModel], obj: Any, rel: str, keys: tuple):
        self.expect(obj, dict, rel, keys)
        if model is ReleaseMCQ:         # what the prompts show: counted for the departures
            shown = [v for k, v in obj.items() if k in ("Question", *OPTION_KEYS) and isinstance(v, str)]
            self.asked += len(shown)
            self.stripped += sum(v != v.strip() for v in shown)
        try:
            return model.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err.get("loc") or ()) or None
            msg = "is missing" if err["type"] == "missing" else expected(err, err["msg"])
            self.fail(rel, keys, field, msg)


def _commit(root: Path) -> str | None:
    """The commit the folder names: its SOURCE.md (a copy's note), else its own .git."""
    note = root / "SOURCE.md"
    if note.is_file():
        m = re.search(r"\b[0-9a-f]{40}\b", note.read_text(encoding="utf-8", errors="replace"))
        if m:
            return m.group(0)
    head = root / ".git" / "HEAD"
    if head.is_file():
        ref = head.read_text().strip()
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            return ref
        target = inside(root / ".git", ref.removeprefix("ref: "), file=head)    # a ref leaving .git is refused
        if target.is_file():
            return target.read_text().strip()
    return None


def concept_map() -> tuple[Path, ConceptMap]:
    path = Path(str(resources.files(__package__) / "data" / CONCEPTS))
    return path, validate_yaml(ConceptMap, read_yaml(path), file=path)


# -- the import ----------------------------------------------------------------------------------
def _characters(rel: _Release) -> tuple[list[Profile], list[str]]:
    meta = rel.read(META, dict)
    chars, left = [], []
    for key in REGIONS:
        if key not in meta:
            rel.fail(META, (), key, f"no region '{key}'")
    for key, group in meta.items():
        rel.expect(group, dict, META, (key,))
        if key not in REGIONS:
            left.append(f"{len(group)} characters of region '{key}' in {META} "
                        f"({', '.join(group)}): the paper does not use them")
            continue
        for name, raw in group.items():
            c = rel.model(ReleaseCharacter, raw, META, (key, name))
            chars.append(Profile(id=slug(c.name), name=c.name, region=REGIONS[key][0], profile=c.profile,
                                 reality="real" if c.history == "real" else "fiction",
                                 period="historical" if c.time == "past" else "contemporary",
                                 source=f"{META} {_jpath(key, name)}"))
    return chars, left


def _temporal(rel: _Release, roles: list[Profile], concepts_path: Path, cmap: ConceptMap) -> list[CharmItem]:
    qs = rel.read(TEMPORAL, list)
    lines = {c.n: c for c in cmap.concepts}
    if sorted(lines) != list(range(1, len(qs) + 1)):
        raise InputError(f"names concepts for questions {sorted(lines)[0]}..{sorted(lines)[-1]} "
                         f"({len(lines)}), but {TEMPORAL} has {len(qs)}", file=str(concepts_path), field="concepts")
    mine = f"ours: {concepts_path.name} (unvalidated)"
    items = []
    for i, raw in enumerate(qs):
        q = rel.model(ReleaseMCQ, raw, TEMPORAL, (i,))
        c = lines[i + 1]
        if c.match.lower() not in q.Question.lower():
            rel.fail(TEMPORAL, (i,), "Question", f"does not mention '{c.match}' ({concepts_path.name}, n: {c.n}): "
                                                  "the release's temporal questions are not in the order this "
                                                  "importer knows")
        if not is_abstain(q.options[q.label - 1]):
            rel.fail(TEMPORAL, (i,), "True Label", "a BC question's answer is the abstention option")
        for role in roles:
            base = dict(role=role.id, role_name=role.name, profile=role.profile, region=role.region,
                        target=c.id, target_name=c.id.replace("-", " "), boundary="temporal")
            ba_id = f"ba/temporal/{role.id}/{c.id}"
            items.append(CharmItem(id=ba_id, stage="ba", question=c.ba_question, gold="No", source=mine,
                                   note=f"the BA Temporal question is ours: the release has none (concept of "
                                        f"{TEMPORAL} {_jpath(i)})", **base))
            items.append(rel.item(TEMPORAL, (i,), id=f"bc/temporal/{role.id}/{c.id}", stage="bc", question=q.Question,
                               options=q.options, gold=q.label, ba_id=ba_id, ba_question=c.ba_question, **base))
    return items


def _facts(rel: _Release, fact_doc: dict, key: str, target: Profile) -> list[tuple[int, ReleaseMCQ, int | None]]:
    """(index, fact, index of the earlier fact it repeats) of one target in fact_mc.json."""
    region = rel.expect(fact_doc.get(key), dict, FACT, (key,))
    if target.name not in region:
        rel.fail(FACT, (key,), target.name, f"no facts for the target '{target.name}'")
    raw = rel.expect(region[target.name], list, FACT, (key, target.name))
    out, seen = [], {}
    for j, obj in enumerate(raw):
        f = rel.model(ReleaseMCQ, obj, FACT, (key, target.name, j))
        if is_abstain(f.options[f.label - 1]):
            rel.fail(FACT, (key, target.name, j), "True Label", "a KV question's answer is the fact, not abstention")
        k = (f.Question, f.Answer)
        out.append((j, f, seen.get(k)))
        seen.setdefault(k, j)
    return out


def _role_questions(rel: _Release, key: str, role: Profile, records: list, targets: list[Profile]):
    """One role's cross_mc.json list: its BA questions (target id -> (index, text)) and its BC
    questions in blocks by target. A BC question that names no target is in the block it sits in."""
    ba: dict[str, tuple[int, str]] = {}
    blocks: dict[str, list[tuple[int, ReleaseMCQ]]] = {t.id: [] for t in targets}
    current = None
    for j, obj in enumerate(records):
        keys = (key, role.name, j)
        q = rel.model(ReleaseMCQ, obj, CROSS, keys)
        named = [t for t in targets if t.name in q.Question]
        if len(named) > 1:
            rel.fail(CROSS, keys, "Question", f"names more than one target ({', '.join(t.name for t in named)})")
        if _BA.match(q.Question) and q.real_fact is None:
            if not named:
                rel.fail(CROSS, keys, "Question", "an awareness question that names no target of the region")
            ba[named[0].id] = (j, q.Question)
            continue
        if q.real_fact is None:
            rel.fail(CROSS, keys, "real_fact", "is missing (a compliance question names its factual option)")
        current = named[0] if named else current
        if current is None:
            rel.fail(CROSS, keys, "Question", "names no target, and no earlier question does")
        if q.real_fact not in q.options:
            rel.fail(CROSS, keys, "real_fact", "is none of the five options")
        if not is_abstain(q.options[q.label - 1]):
            rel.fail(CROSS, keys, "True Label", "a BC question's answer is the abstention option")
        blocks[current.id].append((j, q))
    return ba, blocks


def _cross(rel: _Release, chars: list[Profile]) -> list[CharmItem]:
    """BA and BC Cross from cross_mc.json, KV from fact_mc.json (once per role of the region)."""
    doc, fact_doc = rel.read(CROSS, dict), rel.read(FACT, dict)
    items: list[CharmItem] = []
    for key, (region, _) in REGIONS.items():
        roles = {c.name: c for c in chars if c.region == region and c.period == "historical"}
        targets = [c for c in chars if c.region == region and c.period == "contemporary"]
        if key not in doc:
            rel.fail(CROSS, (), key, f"no region '{key}'")
        group = rel.expect(doc[key], dict, CROSS, (key,))
        if sorted(group) != sorted(roles):
            rel.fail(CROSS, (key,), None, f"role characters {sorted(group)}; {META} has the historical "
                                          f"{sorted(roles)}")
        facts = {t.id: _facts(rel, fact_doc, key, t) for t in targets}
        for name, records in group.items():
            role = roles[name]
            ba, blocks = _role_questions(rel, key, role, rel.expect(records, list, CROSS, (key, name)), targets)
            base = dict(role=role.id, role_name=role.name, profile=role.profile, region=region, boundary="cross")
            for t in targets:
                if t.id not in ba:
                    rel.fail(CROSS, (key, name), "Question", f"no awareness question about '{t.name}'")
                j, ba_q = ba[t.id]
                items.append(rel.item(CROSS, (key, name, j), id=f"ba/cross/{role.id}/{t.id}", stage="ba",
                                      target=t.id, target_name=t.name, question=ba_q, gold="No",
                                      note="asked as Table 19's Yes/No; the release writes it as a 5-choice MCQ",
                                      **base))
                distinct = [(fj, f) for fj, f, first in facts[t.id] if first is None]
                if len(blocks[t.id]) != len(distinct):
                    rel.fail(CROSS, (key, name), "Question",
                             f"{len(blocks[t.id])} compliance questions about '{t.name}', but {FACT} has "
                             f"{len(distinct)} distinct facts of it (they pair in order)")
                paired = set()
                for (fj, _), (bj, q) in zip(distinct, blocks[t.id]):
                    fid, paired = f"{t.id}-{fj + 1:02d}", paired | {fj}
                    items.append(rel.item(CROSS, (key, name, bj), id=f"bc/cross/{role.id}/{fid}", stage="bc",
                                          target=t.id, target_name=t.name, fact=fid, question=q.Question,
                                          options=q.options, gold=q.label,
                                          fact_option=q.options.index(q.real_fact) + 1, answer=q.real_fact,
                                          ba_id=f"ba/cross/{role.id}/{t.id}", ba_question=ba_q,
                                          kv_id=f"kv/{role.id}/{fid}", **base))
                for fj, f, first in facts[t.id]:
                    items.append(_kv(rel, key, role, t, fj, f, first, fj in paired))
    return items


def _kv(rel: _Release, key: str, role: Profile, t: Profile, fj: int, f: ReleaseMCQ, first: int | None,
        paired: bool) -> CharmItem:
    """The target's fact asked as the target (for one role's instances: `kv/<role>/<fact>`)."""
    fid = f"{t.id}-{fj + 1:02d}"
    note = None if first is None else (f"the release repeats fact {first + 1} here (same question and answer): "
                                       "no BC question pairs with it")
    return rel.item(FACT, (key, t.name, fj), id=f"kv/{role.id}/{fid}", stage="kv", boundary="cross", role=t.id,
                    role_name=t.name, profile=t.profile, region=t.region, target=t.id, target_name=t.name,
                    fact=fid, question=f.Question, options=f.options, gold=f.label, fact_option=f.label,
                    answer=f.Answer, bc_id=f"bc/cross/{role.id}/{fid}" if paired else None, note=note)


@writes(".jsonl", kind="JSON Lines (a header line, then one question a line)")
def import_official(src: str, out: str) -> str:
    root = Path(src)
    if not root.is_dir():
        raise InputError("expected the release folder (test_data/, source_data/, prompt/)", file=src)
    rel = _Release(root)
    concepts_path, cmap = concept_map()
    chars, left = _characters(rel)
    roles = [c for c in chars if c.period == "historical"]
    items = _temporal(rel, roles, concepts_path, cmap) + _cross(rel, chars)
    order = {"ba": 0, "bc": 1, "kv": 2}
    items.sort(key=lambda i: (i.boundary != "temporal", order[i.stage]))   # stable: the release's order within
    commit = _commit(root)
    n_hist = sum(len(lst) for g in rel.read(FACT, dict).values() for name, lst in g.items()
                 if name in {c.name for c in roles})
    differences = differences_from_paper(items) + [
        "KV: the release's 184 target facts are asked once per historical character of the region (x 4); the "
        "paper's Table 7 splits its 736 KV questions otherwise",
        "BA Cross: the release writes the 80 awareness items as 5-choice MCQs; they are asked as Table 19's Yes/No"]
    lone = [i for i in items if i.stage == "kv" and i.bc_id is None]
    if lone:
        facts = sorted({f"{i.target_name} fact {i.fact.rsplit('-', 1)[-1].lstrip('0')}" for i in lone})
        differences.append(f"{FACT} repeats a fact ({', '.join(facts)}: same question and answer as an earlier one): "
                           f"its {len(lone)} KV questions have no BC partner")
    if rel.stripped:
        differences.append(f"{rel.stripped} of the release's {rel.asked} question and option strings have leading or "
                           "trailing spaces, stripped here (no word changes; the prompts show them trimmed, as "
                           "the answers they are matched against are)")
    if commit != COMMIT:
        differences.append(f"release commit {commit or 'unknown'}, not {COMMIT}, which this importer was written "
                           "against")
    header = Header(format=FORMAT, regions=[Region(id=r, name=n) for r, n in REGIONS.values()], characters=chars,
                    provenance=Provenance(
                        release="CHARM, the authors' release (Han, Park, Seo, Yoon, Bak)", repo=REPO, commit=commit,
                        imported_from=str(root),
                        differences=differences,
                        ours=[f"the 600 BA Temporal questions: the concept behind each of the 30 temporal questions "
                              f"named in {concepts_path.name} ({cmap.source}; validated: {str(cmap.validated).lower()})",
                              _yes_control_line(roles)],
                        left_out=left + [
                            f"{n_hist} facts of {FACT} about the historical characters (the KV questions ask the "
                            "contemporary targets)",
                            "test_data/cultural_mc.json (200 cultural questions, not in the paper)"]))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        write_release(tmp, header, items)
        load_release(tmp)          # the suite's own loader reads what was written
    return _summary(items, header, out)


def _yes_control_line(roles: list[Profile]) -> str:
    """The BA Yes control (--set ba_control, asked by the run, not held in the import): ours, for
    these roles, asked under the release's own profiles."""
    from .data import load_ba_control

    control = load_ba_control()
    n = sum(len(control.roles.get(r.id) or []) for r in roles)
    missing = [r.name for r in roles if not control.roles.get(r.id)]
    return (f"the BA Yes control (not in the paper; --set ba_control=false skips it): {n} in-boundary awareness "
            f"questions whose answer is Yes, about each of the {len(roles) - len(missing)} historical characters' "
            f"own era and story, asked as BA under the profiles of {META} (data/ba_control.yaml: {control.source}; "
            f"validated: {str(control.validated).lower()})" + (f"; none for {', '.join(missing)}" if missing else ""))


def _summary(items: list[CharmItem], header: Header, out: str) -> str:
    from collections import Counter

    n = Counter(f"{i.stage.upper()} {i.boundary}" for i in items)
    p = header.provenance
    counts = ", ".join(f"{k} {v}" for k, v in sorted(n.items()))
    lines = [f"{len(items)} questions ({counts}) of {len(header.characters)} characters -> {out} "
             f"(release commit {p.commit or 'unknown'})"]
    for title, rows in (("ours", p.ours), ("left out", p.left_out), ("differs from the paper", p.differences)):
        lines += [f"  {title}: {r}" for r in rows]
    return "\n".join(lines)
