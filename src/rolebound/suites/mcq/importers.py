"""Import multiple-choice questions from a spreadsheet (CSV) into the mcq suite's JSONL.

    rolebound data import mcq-csv questions.csv --out questions.jsonl
    rolebound run mcq --data questions.jsonl

Columns (case-insensitive, spaces read as _; first match wins):
  question  question | stem | prompt
  options   A, B, C, ... (as many as the sheet has; empty cells at a row's end are no option) |
            option_a, option_b, ... | choice_a, choice_b, ... | options or choices (a JSON list)
  answer    answer | gold | label | correct | answer_key: a letter, an option's text, or a 0-based
            index (0 is A) when no option has that text
  id        id | qid | question_id (default: <file name>-00001, ...)
Any other column is kept on the item for the template: `name` and `source` name the character the
default template asks to play, and `--set group=COLUMN` splits the accuracy by a column. Items are
`validated: false` unless a validated column says otherwise.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...errors import InputError
from ...importers import writes
from ...io import atomic_path, expected, json_loads, read_csv_table
from .data import MCQItem, load_items

ALIASES = {
    "id": ("id", "qid", "question_id"),
    "question": ("question", "stem", "prompt"),
    "answer": ("answer", "gold", "label", "correct", "answer_key"),
    "options": ("options", "choices"),
}
OPTION_PREFIXES = ("", "option_", "choice_")
TRUE, FALSE = ("true", "yes", "y", "1"), ("false", "no", "n", "0")


def _layout(header: list[str], file: str) -> dict[str, Any]:
    """Which column holds what, read once from the header (line 1)."""
    cols = {f: next((a for a in names if a in header), None) for f, names in ALIASES.items()}
    letters = []
    for prefix in OPTION_PREFIXES:
        for ch in string.ascii_lowercase:
            if f"{prefix}{ch}" not in header:
                break
            letters.append(f"{prefix}{ch}")
        if len(letters) >= 2:
            break
        letters = []
    if letters and cols["options"]:
        raise InputError("options given twice: use columns A, B, ... or one JSON list column, not both",
                         file=file, line=1, field=cols["options"])
    if not letters and not cols["options"]:
        raise InputError("no options: give columns A, B, ... (or option_a.., choice_a..) or an options column "
                         "with a JSON list", file=file, line=1, field="options")
    for field in ("question", "answer"):
        if not cols[field]:
            raise InputError(f"no {field} column ({', '.join(ALIASES[field])})", file=file, line=1, field=field)
    return {**cols, "letters": letters}


def _options(cells: dict[str, str], lay: dict, file: str, line: int) -> list[str]:
    if lay["letters"]:
        vals = [cells.get(c, "") for c in lay["letters"]]
        while vals and not vals[-1]:
            vals.pop()
        for col, val in zip(lay["letters"], vals):
            if not val:
                raise InputError("empty option before a later one", file=file, line=line, field=col)
        return vals
    col = lay["options"]
    why = ""
    try:
        vals = json_loads(cells.get(col) or "null")
    except json.JSONDecodeError as exc:
        vals, why = None, f" (not JSON: {exc.msg})"
    if not isinstance(vals, list):
        raise InputError(f'expected a JSON list, e.g. ["red", "green", "blue"]{why}', file=file, line=line, field=col)
    return [str(v).strip() for v in vals]


def _answer(text: str, options: list[str]) -> str | int:
    """A letter or an option's text as given (MCQItem reads them); other digits are a 0-based index."""
    if len(text) == 1 and text.upper() in string.ascii_uppercase[: len(options)] or text in options:
        return text
    return int(text) if text.isdigit() else text


def _validated(cells: dict[str, str], file: str, line: int) -> bool:
    val = cells.get("validated", "").lower()
    if val and val not in TRUE + FALSE:
        raise InputError(f"validated must be true or false, not {val!r}", file=file, line=line, field="validated")
    return val in TRUE


def _item(cells: dict[str, str], lay: dict, n: int, file: str, line: int) -> MCQItem:
    options = _options(cells, lay, file, line)
    used = {c for c in (lay["id"], lay["question"], lay["answer"], lay["options"], "validated", "note") if c}
    used.update(lay["letters"])
    obj: dict[str, Any] = {"id": cells.get(lay["id"] or "") or f"{Path(file).stem}-{n:05d}",
                           "question": cells[lay["question"]], "options": options,
                           "answer": _answer(cells[lay["answer"]], options)}
    obj.update({k: v for k, v in cells.items() if k not in used and v})
    # provenance goes in `note`: `source` is the default template's character source
    where = f"imported from {Path(file).name}, line {line}"
    obj["note"] = "; ".join(x for x in (cells.get("note"), where) if x)
    obj["validated"] = _validated(cells, file, line)
    for field in ("question", "answer"):
        if obj[field] == "":
            raise InputError(f"no {field}", file=file, line=line, field=lay[field])
    try:
        return MCQItem.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = str((err.get("loc") or ("answer",))[0])      # the answer check names no field
        col = {"options": lay["options"] or f"{lay['letters'][0]}..{lay['letters'][-1]}"}.get(loc, lay.get(loc) or loc)
        e = InputError(expected(err, err["msg"]), file=file, line=line, field=col)
        e.dump = str(exc)
        raise e from None


def read_items(src: str) -> list[tuple[int, MCQItem]]:
    """(line, item) of each row of the CSV; blank rows are skipped."""
    header, rows = read_csv_table(src)
    if not rows:
        raise InputError("no rows to import", file=src)
    lay = _layout(header, src)
    out: list[tuple[int, MCQItem]] = []
    seen: dict[str, int] = {}
    for line, cells in rows:
        item = _item(cells, lay, len(out) + 1, src, line)
        if item.id in seen:
            raise InputError(f"duplicate id '{item.id}' (first on line {seen[item.id]})", file=src, line=line,
                             field=lay["id"] or "id")
        seen[item.id] = line
        out.append((line, item))
    if not out:
        raise InputError("no rows to import", file=src)
    return out


@writes(".jsonl", kind="JSON Lines")
def import_csv(src: str, out: str) -> str:
    items = [it for _, it in read_items(src)]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        tmp.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items),
                       encoding="utf-8")
        load_items(str(tmp))      # the suite's own loader reads what was written
    sizes = Counter(len(it.options) for it in items)
    answers = Counter(it.answer for it in items)
    unchecked = sum(1 for it in items if not it.validated)
    return (f"{len(items)} questions -> {out}; options per question: "
            + ", ".join(f"{k} ({v})" for k, v in sorted(sizes.items()))
            + "; answers: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items()))
            + f"; {'all' if unchecked == len(items) else unchecked} validated: false")


IMPORTERS = {
    "mcq-csv": (import_csv, "multiple-choice questions from a CSV (options as A, B, ... columns or a JSON "
                            "list) -> mcq JSONL"),
}
