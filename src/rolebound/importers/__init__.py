"""Importers for public datasets: `rolebound data import FORMAT SRC --out FILE`.

Every registered suite's `importers()` hook, and any other package's `rolebound.importers` entry
point (a module with IMPORTERS), gives {format: (function(src, out) -> summary, help)}.
"""

from __future__ import annotations

from .. import plugins


def all_importers() -> dict:
    from ..suites import available, get_suite

    out = {}
    for name in available():
        out.update(get_suite(name).importers())
    for target in plugins.entry_points(plugins.IMPORTERS).values():
        out.update(getattr(plugins.load(target), "IMPORTERS", {}))
    return out
