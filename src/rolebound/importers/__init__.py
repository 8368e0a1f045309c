"""Importers for public datasets: `rolebound data import FORMAT SRC --out FILE`.

Every registered suite's `importers()` hook, and any other package's `rolebound.importers` entry
point (a module with IMPORTERS), gives {format: (function(src, out) -> summary, help)}. A function
marked @writes(".jsonl", kind="JSON Lines") gets only an --out of that suffix: the readers of
--data go by the suffix, so a file named for another format could not be read back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .. import plugins
from ..errors import InputError


def writes(*suffixes: str, kind: str) -> Callable:
    """Mark an importer with the file suffixes (lower case) its output takes, and their format."""
    def mark(fn: Callable) -> Callable:
        fn.writes = (suffixes, kind)
        return fn
    return mark


def check_suffix(fmt: str, fn: Callable, out: str | Path) -> None:
    """An --out whose suffix names another format than the importer writes: one line, exit 2."""
    suffixes, kind = getattr(fn, "writes", ((), ""))
    if suffixes and Path(out).suffix.lower() not in suffixes:
        raise InputError(f"{fmt} writes {kind}, and '{Path(out).name}' names another format; name the file "
                         + " or ".join(f"*{s}" for s in suffixes), field="--out")


def all_importers() -> dict:
    from ..suites import available, get_suite

    out = {}
    for name in available():
        out.update(get_suite(name).importers())
    for target in plugins.entry_points(plugins.IMPORTERS).values():
        out.update(getattr(plugins.load(target), "IMPORTERS", {}))
    return out
