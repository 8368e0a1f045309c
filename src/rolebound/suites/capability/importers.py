"""Import user exam sets into the capability suite's JSONL schema.

    rolebound data import capability-csv exam.csv --out exam.jsonl
    rolebound data import capability-jsonl exam_raw.jsonl --out exam.jsonl
    rolebound run capability --data exam.jsonl

Columns / keys (case-insensitive; first match wins):
  level     level | grade | difficulty   a level id or name of roles.yaml, or a US grade:
                                         3-5 elementary, 6-8 intermediate, 9-12 or "regents" high school
  question  question | stem | prompt
  options   A, B, C, D | option_a..option_d | choice_a..choice_d | options/choices (a JSON list)
  answer    answer | gold | label | correct  a letter A-D or the exact text of an option
  subject   subject (default "general");  passage: passage | context (optional);  id: id | qid
Any other column is kept on the item; without a `source` column the item's source is the input's file name
(every item says where it comes from, see suites.base.Authored).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...importers import writes
from ...io import json_loads, jsonl_lines, read_csv_rows

ALIASES = {
    "id": ("id", "qid", "question_id"),
    "level": ("level", "grade", "difficulty"),
    "question": ("question", "stem", "prompt"),
    "answer": ("answer", "gold", "label", "correct", "answer_key"),
    "subject": ("subject",),
    "passage": ("passage", "context"),
}
OPTION_KEYS = (("a", "b", "c", "d"), ("option_a", "option_b", "option_c", "option_d"),
               ("choice_a", "choice_b", "choice_c", "choice_d"))
GRADE_LEVELS = {**{g: "elementary" for g in (3, 4, 5)}, **{g: "intermediate" for g in (6, 7, 8)},
                **{g: "high_school" for g in (9, 10, 11, 12)}}
NAMED_LEVELS = {"regents": "high_school", "high_school": "high_school", "a_level": "a_level",
                "alevel": "a_level", "elementary": "elementary", "intermediate": "intermediate"}


def map_level(value: Any) -> str | None:
    """A grade or a level name -> a level key; unknown names pass through for the suite to check."""
    s = str(value).strip()
    if not s:
        return None
    m = re.fullmatch(r"(?i)(?:grade\s*)?(\d{1,2})(?:th|st|nd|rd)?(?:\s*grade)?", s)
    if m:
        return GRADE_LEVELS.get(int(m.group(1)), f"grade_{int(m.group(1))}")
    key = re.sub(r"[\s\-_]+", "_", s.lower())
    return NAMED_LEVELS.get(key, key)


def _get(row: dict, names: tuple[str, ...]) -> tuple[str | None, Any]:
    for n in names:
        if n in row and row[n] not in (None, ""):
            return n, row[n]
    return None, None


def convert(row: dict[str, Any], *, n: int, stem: str, file: str, line: int | None) -> dict[str, Any]:
    """One loose row -> our item schema; InputError names the file, line and field."""
    low = {str(k).strip().lower(): v for k, v in row.items() if k is not None}
    used: set[str] = set()
    out: dict[str, Any] = {}
    for field in ("id", "level", "question", "answer", "subject", "passage"):
        key, val = _get(low, ALIASES[field])
        if key:
            used.add(key)
        out[field] = val
    if out["level"] is None:
        raise InputError("no level (columns: level, grade or difficulty)", file=file, line=line, field="level")
    out["level"] = map_level(out["level"])
    if out["question"] is None:
        raise InputError("no question (columns: question, stem or prompt)", file=file, line=line, field="question")
    if out["answer"] is None:
        raise InputError("no answer (columns: answer, gold, label or correct)", file=file, line=line, field="answer")
    options = None
    for keys in OPTION_KEYS:
        if all(k in low for k in keys):
            options = [low[k] for k in keys]
            used.update(keys)
            break
    if options is None:
        key, val = _get(low, ("options", "choices"))
        if key:
            used.add(key)
            if isinstance(val, str):
                try:
                    val = json_loads(val)
                except json.JSONDecodeError:
                    raise InputError("options must be a JSON list of four strings", file=file, line=line,
                                     field=key) from None
            if isinstance(val, dict):
                val = [val[k] for k in sorted(val)]
            options = val
    if not isinstance(options, list) or len(options) != 4:
        raise InputError("need four options (columns A-D, option_a-option_d, choice_a-choice_d, or an "
                         "'options' list of four)", file=file, line=line, field="options")
    out["options"] = [str(o).strip() for o in options]
    out["id"] = str(out["id"]) if out["id"] is not None else f"{stem}-{n:05d}"
    out["subject"] = str(out["subject"]) if out["subject"] is not None else "general"
    out["answer"] = str(out["answer"]).strip()
    if not out["passage"]:
        out.pop("passage")
    for k, v in low.items():
        if k not in used and k not in out and v not in (None, ""):
            out[k] = v
    out.setdefault("source", Path(file).name)
    return out


def csv_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, item dict) of a CSV with a level column."""
    path = Path(path)
    return [(ln, convert(row, n=i, stem=path.stem, file=str(path), line=ln))
            for i, (ln, row) in enumerate(read_csv_rows(path), 1)]


def jsonl_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    path = Path(path)
    out = []
    for ln, obj in jsonl_lines(path):
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", file=str(path), line=ln)
        out.append((ln, convert(obj, n=len(out) + 1, stem=path.stem, file=str(path), line=ln)))
    return out


def _write(rows: list[tuple[int, dict]], src: str, out: str) -> str:
    from ...io import validate_record
    from .data import CapabilityItem, load_roles

    cfg = load_roles()
    seen: dict[str, int] = {}
    items = []
    for ln, obj in rows:
        item = validate_record(CapabilityItem, obj, file=src, line=ln)
        if item.id in seen:
            raise InputError(f"duplicate id '{item.id}' (first on line {seen[item.id]})", file=src, line=ln,
                             field="id")
        seen[item.id] = ln
        items.append(item)
    if not items:
        raise InputError("no rows to import", file=src)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it.model_dump(exclude_none=True), ensure_ascii=False) + "\n")
    levels = Counter(it.level for it in items)
    unknown = sorted(lv for lv in levels if cfg.resolve_level(lv) is None)
    msg = f"{len(items)} items -> {out}; levels: " + ", ".join(f"{k} {v}" for k, v in sorted(levels.items()))
    if unknown:
        msg += (f"; not in the built-in roles.yaml: {', '.join(unknown)} (add them to a roles file and "
                "pass --set roles_file=FILE)")
    return msg


@writes(".jsonl", kind="JSON Lines")
def import_csv(src: str, out: str) -> str:
    return _write(csv_rows(src), src, out)


@writes(".jsonl", kind="JSON Lines")
def import_jsonl(src: str, out: str) -> str:
    return _write(jsonl_rows(src), src, out)


IMPORTERS = {
    "capability-csv": (import_csv, "exam questions from a CSV with a level column -> capability JSONL"),
    "capability-jsonl": (import_jsonl, "exam questions from loosely keyed JSONL -> capability JSONL"),
}
