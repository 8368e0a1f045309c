"""Import a user's own CHARM characters, facts and concepts from spreadsheets (CSV).

    rolebound data import charm-csv my_characters.csv --out mine.yaml
    rolebound data import charm-csv my_charm/ --out mine.yaml    # characters.csv, facts.csv, concepts.csv
    rolebound run charm --data mine.yaml

SRC is a CSV of characters, or a folder holding any of characters.csv, facts.csv and concepts.csv.
Headers are case-insensitive, spaces read as _; an empty cell is an absent value.
  characters.csv  name, region, profile, reality (real | fiction), period (historical | contemporary),
                  universe; era_end (a historical character's last year), known_since, id (default:
                  from the name), region_name (the name of a region that is not built in)
  facts.csv       target (a contemporary character's id), bc_question, kv_question, answer,
                  distractor_1..distractor_3 (or distractors: a JSON list); id (default <target>-NN)
  concepts.csv    name, year, ba_template_1..N (or ba_templates: a JSON list), bc_question, answer,
                  distractors as for facts; id (default: from the name)
  every file      source, note, validated (default false)
A row without a source gets the CSV and its line as its source; a row with one gets them in its note.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ...errors import InputError
from ...importers import writes
from ...io import atomic_path, expected, json_loads, read_csv_table
from .data import CharmData, Character, Concept, Fact, Region, load_data, slug
from .official import import_official

KINDS = ("characters", "facts", "concepts")
MODELS: dict[str, type[BaseModel]] = {"characters": Character, "facts": Fact, "concepts": Concept}
# list fields: one JSON-list column, or numbered columns (distractor_1, distractor_2, ...)
LISTS = {"characters": {}, "facts": {"distractors": "distractor"},
         "concepts": {"distractors": "distractor", "ba_templates": "ba_template"}}
EXTRA = {"characters": ("region_name",), "facts": (), "concepts": ()}
# a check of the whole row (pydantic gives no field): the column it is about
WHOLE_ROW = {"characters": "era_end", "facts": "distractors", "concepts": "distractors"}
LOWERED = {"reality": {"fictional": "fiction"}, "period": {}}


def _columns(kind: str) -> list[str]:
    return [f for f in MODELS[kind].model_fields if f != "validated"] + ["validated", *EXTRA[kind]]


def _check_header(kind: str, header: list[str], file: str) -> None:
    known = set(_columns(kind))
    numbered = "|".join(LISTS[kind].values())
    for col in header:
        if col not in known and not (numbered and re.fullmatch(rf"(?:{numbered})_?\d+", col)):
            shown = ", ".join(_columns(kind) + [f"{b}_1.." for b in LISTS[kind].values()])
            raise InputError(f"unknown column '{col}' for {kind}; known: {shown}", file=file, line=1, field=col)


def _listed(cells: dict[str, str], field: str, base: str, file: str, line: int):
    """(values, column names) of a list field, from its JSON column or its numbered columns."""
    if cells.get(field):
        why = ""
        try:
            vals = json_loads(cells[field])
        except json.JSONDecodeError as exc:
            vals, why = None, f" (not JSON: {exc.msg})"
        if not isinstance(vals, list):
            raise InputError(f'expected a JSON list, e.g. ["one", "two", "three"]{why}', file=file, line=line,
                             field=field)
        return [str(v) for v in vals], [field]
    pat = re.compile(rf"{base}_?(\d+)")
    cols = sorted((c for c in cells if pat.fullmatch(c)), key=lambda c: int(pat.fullmatch(c).group(1)))
    cols = [c for c in cols if cells[c]]
    return ([cells[c] for c in cols], cols) if cols else (None, [])


def _fields(kind: str, cells: dict[str, str], file: str, line: int) -> tuple[dict[str, Any], dict]:
    """The row's model fields (empty cells left out) and, per field, the column(s) it came from."""
    fields: dict[str, Any] = {}
    where: dict[str, list[str]] = {}
    for field, base in LISTS[kind].items():
        vals, cols = _listed(cells, field, base, file, line)
        if vals is not None:
            fields[field], where[field] = vals, cols
    for col in _columns(kind):
        if col in fields or col in LISTS[kind] or col in EXTRA[kind] or not cells.get(col):
            continue
        val = cells[col]
        if col in LOWERED:
            val = LOWERED[col].get(val.lower(), val.lower())
        fields[col], where[col] = val, [col]
    name = Path(file).name
    if fields.get("source"):
        fields["note"] = "; ".join(x for x in (fields.get("note"), f"imported from {name}, line {line}") if x)
    else:
        fields["source"] = f"{name}, line {line}"
    return fields, where


def _column(kind: str, loc: tuple, where: dict[str, list[str]]) -> str:
    if not loc:
        loc = (WHOLE_ROW[kind],)
    cols = where.get(str(loc[0])) or [str(loc[0])]
    if len(cols) > 1 and len(loc) > 1 and isinstance(loc[1], int) and loc[1] < len(cols):
        return cols[loc[1]]
    return cols[0] if len(cols) == 1 else f"{cols[0]}..{cols[-1]}"


def _validate(kind: str, fields: dict, where: dict, file: str, line: int) -> BaseModel:
    try:
        return MODELS[kind].model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = "is empty (a value is required)" if err["type"] == "missing" else expected(err, err["msg"])
        e = InputError(msg, file=file, line=line, field=_column(kind, tuple(err.get("loc") or ()), where))
        e.dump = str(exc)
        raise e from None


def read_kind(kind: str, path: Path) -> list[tuple[int, BaseModel, dict[str, str]]]:
    """(line, validated object, cells) of each row of one CSV."""
    file = str(path)
    header, rows = read_csv_table(path)
    _check_header(kind, header, file)
    out, per_target = [], {}
    for line, cells in rows:
        fields, where = _fields(kind, cells, file, line)
        if "id" not in fields:
            key = "target" if kind == "facts" else "name"
            if not fields.get(key):
                raise InputError(f"no {key} (and no id)", file=file, line=line, field=key)
            per_target[fields[key]] = per_target.get(fields[key], 0) + 1
            fields["id"] = (f"{slug(fields[key])}-{per_target[fields[key]]:02d}" if kind == "facts"
                            else slug(fields[key]))
        out.append((line, _validate(kind, fields, where, file, line), cells))
    return out


def _sources(src: str) -> dict[str, Path]:
    path = Path(src)
    if not path.is_dir():
        return {"characters": path}
    found = {k: path / f"{k}.csv" for k in KINDS if (path / f"{k}.csv").is_file()}
    stray = sorted(p.name for p in path.glob("*.csv") if p.stem not in KINDS)
    if stray:
        raise InputError(f"unexpected CSV '{stray[0]}'; a charm-csv folder holds characters.csv, facts.csv "
                         "and concepts.csv", file=str(path / stray[0]))
    if not found:
        raise InputError("no characters.csv, facts.csv or concepts.csv in this folder", file=src)
    return found


def _check_ids(rows: dict[str, list], builtin: CharmData, files: dict[str, Path]) -> None:
    for kind, items in rows.items():
        taken = {o.id for o in getattr(builtin, kind)}
        seen: dict[str, int] = {}
        for line, obj, _ in items:
            if obj.id in taken:
                raise InputError(f"id '{obj.id}' is a built-in {kind[:-1]}'s; give this one another id",
                                 file=str(files[kind]), line=line, field="id")
            if obj.id in seen:
                raise InputError(f"duplicate id '{obj.id}' (first on line {seen[obj.id]}; an id made from a "
                                 "name repeats when the name does: give an id column)",
                                 file=str(files[kind]), line=line, field="id")
            seen[obj.id] = line


def _check_targets(rows: dict[str, list], builtin: CharmData, files: dict[str, Path]) -> None:
    chars = {c.id: c for c in builtin.characters} | {o.id: o for _, o, _ in rows.get("characters", [])}
    for line, fact, _ in rows.get("facts", []):
        target = chars.get(fact.target)
        if target is None:
            raise InputError(f"unknown character '{fact.target}' (neither in characters.csv nor built in)",
                             file=str(files["facts"]), line=line, field="target")
        if target.period != "contemporary":
            raise InputError(f"'{fact.target}' is historical; facts are about contemporary targets",
                             file=str(files["facts"]), line=line, field="target")


def _new_regions(rows: dict[str, list], builtin: CharmData, file: str) -> list[Region]:
    known = {r.id for r in builtin.regions}
    new: dict[str, Region] = {}
    for _, char, cells in rows.get("characters", []):
        if char.region not in known and char.region not in new:
            new[char.region] = Region(id=char.region, name=cells.get("region_name") or char.region,
                                      note=f"a region of {Path(file).name}, not built in")
    return list(new.values())


@writes(".yaml", ".yml", kind="YAML")
def import_csv(src: str, out: str) -> str:
    files = _sources(src)
    rows = {kind: read_kind(kind, path) for kind, path in files.items()}
    if not any(rows.values()):
        raise InputError("no rows to import", file=src)
    builtin, _ = load_data([])
    _check_ids(rows, builtin, files)
    _check_targets(rows, builtin, files)
    regions = _new_regions(rows, builtin, str(files.get("characters", src)))
    doc: dict[str, Any] = {"regions": [r.model_dump(exclude_none=True) for r in regions]} if regions else {}
    for kind in KINDS:
        if rows.get(kind):
            doc[kind] = [_dump(o) for _, o, _ in rows[kind]]
    head = f"# CHARM data imported from {src} by `rolebound data import charm-csv`.\n"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        tmp.write_text(head + yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=110), encoding="utf-8")
        load_data([tmp])         # the suite's own loader reads what was written, with the starter set
    return _summary(rows, regions, builtin, out)


def _dump(obj: BaseModel) -> dict[str, Any]:
    """The object's fields in the starter files' order, its provenance (source, note, validated) last."""
    d = obj.model_dump(exclude_none=True)
    head = ("id", "name", "target", "year", "ba_templates", "bc_question", "kv_question", "answer")
    tail = ("source", "note", "validated")
    rest = [k for k in d if k not in head + tail]
    return {k: d[k] for k in (*head, *rest, *tail) if k in d}


def _summary(rows: dict[str, list], regions: list[Region], builtin: CharmData, out: str) -> str:
    objs = [o for items in rows.values() for _, o, _ in items]
    counts = ", ".join(f"{k}: {len(rows[k])}" for k in KINDS if rows.get(k))
    unchecked = sum(1 for o in objs if not o.validated)
    msg = f"{counts} -> {out} ({'all' if unchecked == len(objs) else unchecked} validated: false)"
    if regions:
        msg += "; new regions: " + ", ".join(r.id for r in regions)
    used = sorted(({r.id for r in builtin.regions} & {o.region for _, o, _ in rows.get("characters", [])})
                  | ({c.id for c in builtin.characters} & {o.target for _, o, _ in rows.get("facts", [])}))
    if used:
        msg += f"; uses the starter set's {', '.join(used)} (so no --set builtin=false)"
    if not rows.get("facts") and not rows.get("concepts"):
        msg += "; no facts or concepts of its own (the starter set's are asked)"
    return msg


IMPORTERS = {
    "charm-csv": (import_csv, "your own characters (a CSV, or a folder with characters.csv, facts.csv, "
                              "concepts.csv) -> charm YAML"),
    "charm-official": (import_official, "the CHARM authors' release folder (test_data/, source_data/) -> "
                                        "charm questions (.jsonl), as written; see docs/charm.md"),
}
