"""Paths the docs and docstrings point a reader to exist (test files moved into tests/suites/
once, and three references kept the old place)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(r"(?<![\w/.])((?:tests|bench|scripts)/[\w/.-]+\.(?:py|sh))")


def _texts():
    yield from ROOT.glob("*.md")
    yield from (ROOT / "docs").rglob("*.md")
    yield from (ROOT / "src").rglob("*.md")
    yield from (ROOT / "src").rglob("*.py")
    yield ROOT / "Makefile"


def test_every_named_test_bench_or_script_file_exists():
    missing = []
    for f in _texts():
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            missing += [f"{f.relative_to(ROOT)}:{n}: {p}" for p in PATH.findall(line) if not (ROOT / p).exists()]
    assert not missing, "\n".join(missing)
