"""Human-labelled replies: the user's JSONL (docs/judge-check.md) or a suite's public release."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..io import jsonl_lines, stable_hash, validate_record
from .spec import JudgeCheck, Labelled


def read_labelled(path: str | Path, check: JudgeCheck) -> list[Labelled]:
    """Every line a Labelled row whose context, score names and label values this suite's judge
    can use; the first bad line is one InputError naming file, line and field."""
    rows: list[Labelled] = []
    seen: dict[str, int] = {}
    for line, obj in jsonl_lines(path):
        row = validate_record(Labelled, obj, file=path, line=line)
        validate_record(check.context_model, row.context, file=path, line=line, loc_prefix=("context",))
        if row.id in seen:
            raise InputError(f"id {row.id!r} already used on line {seen[row.id]}", file=str(path), line=line,
                             field="id")
        seen[row.id] = line
        _check_labels(row, check, path, line)
        rows.append(row)
    if not rows:
        raise InputError("no labelled replies in this file", file=str(path))
    return rows


def _check_labels(row: Labelled, check: JudgeCheck, path, line: int) -> None:
    if not row.labels:
        raise InputError("give at least one annotator's labels", file=str(path), line=line, field="labels")
    for who, scores in row.labels.items():
        for name, value in scores.items():
            where = f"labels.{who}.{name}"
            scale = check.scales.get(name)
            if scale is None:
                raise InputError(f"unknown score; this suite's judge scores: {', '.join(check.scales)}",
                                 file=str(path), line=line, field=where)
            if value is not None and not scale.label_ok(value):
                allowed = ", ".join(str(p) for p in scale.points)
                raise InputError(f"{value!r} is not a label on this scale ({allowed}, or null)", file=str(path),
                                 line=line, field=where)


def load(check: JudgeCheck, suite: str, data: str | Path | None) -> tuple[list[Labelled], str]:
    """(rows, source): --data as a JSONL file, or a folder the suite's importer reads; without
    --data, the suite's public release where it lies."""
    if data is None:
        folder = check.default_release() if check.default_release else None
        if folder is None:
            raise InputError(f"give --data FILE: human-labelled replies in the JSONL format of docs/judge-check.md"
                             + (f" (or the folder of {suite}'s public labels)" if check.release else ""),
                             field="--data")
        return check.release(folder), str(folder)
    path = Path(data)
    if path.is_dir():
        if check.release is None:
            raise InputError("is a directory; give the JSONL file of labelled replies", file=str(path))
        return check.release(path), str(path)
    return read_labelled(path, check), str(path)


def rows_hash(rows: list[Labelled]) -> str:
    # a row without a cluster hashes as before the field existed: earlier runs still resume
    return stable_hash([r.model_dump(exclude={"cluster"} if r.cluster is None else None) for r in rows])
