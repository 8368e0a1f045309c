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


MODULE = re.compile(r"`([\w./-]+\.py)`")


def _readmes():
    yield ROOT / "README.md"
    yield from (ROOT / "src").rglob("README.md")


def _exists(name: str, here: Path) -> bool:
    """A module named as the reader would look it up: a bare name beside the README (a suite's
    README names its own files; the top README, the package's), a path from the repository or
    the package (`rolebound/dialogue/run.py`, `models/local.py`)."""
    if "/" not in name:
        return (here / name).exists() or (here == ROOT and (ROOT / "src" / "rolebound" / name).exists())
    return any((b / name).exists() for b in (here, ROOT, ROOT / "src", ROOT / "src" / "rolebound"))


def test_every_module_a_readme_names_exists():
    missing = []
    for f in _readmes():
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            missing += [f"{f.relative_to(ROOT)}:{n}: {m}" for m in MODULE.findall(line)
                        if "<" not in m and "*" not in m and not _exists(m, f.parent)]
    assert not missing, "\n".join(missing)


def test_every_module_of_a_suite_is_in_its_readme():
    """A suite's README table names each of its modules (its __init__ aside), so a reader finds them all."""
    missing = []
    for readme in sorted((ROOT / "src" / "rolebound" / "suites").glob("*/README.md")):
        named = {Path(m).name for m in MODULE.findall(readme.read_text(encoding="utf-8"))}
        missing += [f"{readme.relative_to(ROOT)}: {p.name}" for p in sorted(readme.parent.glob("*.py"))
                    if p.name != "__init__.py" and p.name not in named]
    assert not missing, "\n".join(missing)


def test_the_readme_stays_a_door():
    """The README is the way in (under 10 KB); the operational detail lives in docs/usage.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 10_000
    assert "docs/architecture.md" in text and "docs/usage.md" in text
    assert text.count("```bash") >= 1 and "make demo" in text and "make test" in text
