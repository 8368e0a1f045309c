"""Importers for public datasets: `rolebound data import FORMAT SRC --out FILE`.

A built-in suite's `importers` module, or another package's `rolebound.importers` entry point (a
module), exposes IMPORTERS = {format: (function(src, out) -> summary, help)}.
"""

from __future__ import annotations

from .. import plugins


def all_importers() -> dict:
    targets = list(plugins.builtin_suite_modules("importers").values())
    targets += list(plugins.entry_points(plugins.IMPORTERS).values())
    out = {}
    for target in targets:
        out.update(getattr(plugins.load(target), "IMPORTERS", {}))
    return out
