"""Small builders shared by tests."""

from __future__ import annotations

import json
from pathlib import Path


def write_mcq(path: Path, n: int, *, bad_line: int | None = None) -> Path:
    """n four-option questions; the answer cycles A..D."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = {"id": f"q{i}", "question": f"Question number {i}?", "options": ["w", "x", "y", "z"],
                   "answer": "ABCD"[i % 4]}
            if bad_line is not None and i + 1 == bad_line:
                row["answer"] = "Q"
            fh.write(json.dumps(row) + "\n")
    return path
