"""An imported CHARM release (`rolebound data import charm-official`, official.py): a JSONL file whose
first line is a header (provenance, regions, characters) and whose other lines are the questions,
built already (CharmItem): the suite asks them as they are, with the release's options, their order
and gold answers."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ...errors import InputError
from ...io import jsonl_lines, stable_hash, validate_record
from .data import CharmItem, Region, _Base

FORMAT = "charm-release/1"
COLS = ("BA Temp", "BA Cross", "BC Temp", "BC Cross", "KV Cross")
# The paper's Table 7 (Appendix D): questions by region, boundary type and question type.
PAPER_TABLE7: dict[str, tuple[int, ...]] = {
    "EN": (120, 16, 120, 124, 152), "China": (120, 16, 120, 160, 156), "Korea": (120, 16, 120, 160, 152),
    "Spain": (120, 16, 120, 160, 148), "Indonesia": (120, 16, 120, 128, 128)}


class Profile(_Base):
    """A character as the release's meta_character.json gives it (no era years: the release has none)."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    region: str
    profile: str = Field(min_length=1)
    reality: Literal["real", "fiction"]
    period: Literal["historical", "contemporary"]
    source: str | None = None


class Provenance(_Base):
    release: str                     # what was imported
    repo: str
    commit: str | None = None        # None: the folder did not say
    imported_from: str | None = None
    differences: list[str] = Field(default_factory=list)   # from the paper, each named
    ours: list[str] = Field(default_factory=list)          # what the importer supplied
    left_out: list[str] = Field(default_factory=list)


class Header(_Base):
    format: Literal["charm-release/1"]
    provenance: Provenance
    regions: list[Region]
    characters: list[Profile]


def is_release_file(path: str | Path) -> bool:
    """A .jsonl whose first object is a charm-release header."""
    path = Path(path)
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    for _, obj in jsonl_lines(path):
        return isinstance(obj, dict) and obj.get("format") == FORMAT
    return False


def load_release(path: str | Path) -> tuple[Header, list[CharmItem]]:
    """The header and the questions, each through its model; ids unique and every pairing resolved."""
    header, items, lines = None, [], {}
    for line, obj in jsonl_lines(path):
        if header is None:
            header = validate_record(Header, obj, file=path, line=line)
            continue
        item = validate_record(CharmItem, obj, file=path, line=line)
        if item.id in lines:
            raise InputError(f"duplicate id '{item.id}' (first on line {lines[item.id]})", file=str(path),
                             line=line, field="id")
        lines[item.id] = line
        items.append(item)
    if header is None:
        raise InputError("empty: no header line", file=str(path))
    for item in items:
        for ref in ("ba_id", "kv_id", "bc_id"):
            target = getattr(item, ref)
            if target and target not in lines:
                raise InputError(f"'{target}' is not in this file", file=str(path), line=lines[item.id], field=ref)
    return header, items


def write_release(path: Path, header: Header, items: list[CharmItem]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(header.model_dump(), ensure_ascii=False) + "\n")
        for item in items:
            fh.write(json.dumps(item.model_dump(exclude_none=True), ensure_ascii=False) + "\n")


def release_hash(header: Header, items: list[CharmItem]) -> str:
    """Of the questions and the header, not of the folder they were imported from (a run resumes
    on the same import made elsewhere)."""
    head = header.model_dump()
    head["provenance"].pop("imported_from", None)
    return stable_hash({"header": head, "items": [i.model_dump() for i in items]})


def table7_counts(items) -> dict[str, Counter]:
    rows: dict[str, Counter] = defaultdict(Counter)
    for i in items:
        rows[i.region][{"ba": "BA", "bc": "BC", "kv": "KV"}[i.stage] + " " +
                       ("Temp" if i.boundary == "temporal" else "Cross")] += 1
    return rows


def differences_from_paper(items) -> list[str]:
    """Each Table 7 cell where these questions' count is not the paper's."""
    ours = table7_counts(items)
    out = []
    for region, paper in PAPER_TABLE7.items():
        for col, n in zip(COLS, paper):
            if ours[region][col] != n:
                out.append(f"Table 7 {col}, {region}: {ours[region][col]} here, {n} in the paper")
    return out


def stats_tables(dataset) -> list[tuple[str, Any]]:
    """Table 7 with the paper's figures beside where they differ; characters; provenance."""
    import pandas as pd

    header: Header = dataset.extra["release"]
    ours = table7_counts(dataset.items)
    regions = [r.id for r in header.regions]

    def cell(n: int, p: int | None) -> str:
        return str(n) if p is None or p == n else f"{n} (paper {p})"

    rows = []
    for r in regions:
        paper = PAPER_TABLE7.get(r)
        vals = [ours[r][c] for c in COLS]
        rows.append([cell(v, paper[k] if paper else None) for k, v in enumerate(vals)]
                    + [cell(sum(vals), sum(paper) if paper else None)])
    tot = [sum(ours[r][c] for r in regions) for c in COLS]
    ptot = [sum(p[k] for p in PAPER_TABLE7.values()) for k in range(len(COLS))]
    rows.append([cell(v, p) for v, p in zip(tot, ptot)] + [cell(sum(tot), sum(ptot))])
    df = pd.DataFrame(rows, index=pd.Index(regions + ["Total"], name="Region"), columns=[*COLS, "Total"])
    chars = pd.DataFrame([c.model_dump() for c in header.characters])
    by_char = chars.groupby(["region", "period", "reality"]).size().unstack(fill_value=0)
    p = header.provenance
    notes = ([("release", f"{p.release}, {p.repo} commit {p.commit or 'unknown'}")]
             + [("differs from the paper", d) for d in p.differences]
             + [("ours", d) for d in p.ours] + [("left out", d) for d in p.left_out])
    return [("Table 7: questions by region, boundary type and question type (the paper's figure beside "
             "where it differs)", df),
            ("Characters by region, period and reality status", by_char),
            ("Provenance", pd.DataFrame(notes, columns=["what", "detail"]).set_index("what"))]
