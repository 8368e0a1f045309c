"""Importers for public datasets: `rolebound data import FORMAT SRC --out FILE`.

Each suite's `importers` module exposes IMPORTERS = {format: (function(src, out) -> summary, help)}.
"""

from __future__ import annotations

import importlib
import pkgutil


def all_importers() -> dict:
    from .. import suites

    out = {}
    for pkg in pkgutil.iter_modules(suites.__path__):
        name = f"{suites.__name__}.{pkg.name}.importers"
        if pkg.ispkg and importlib.util.find_spec(name) is not None:
            out.update(getattr(importlib.import_module(name), "IMPORTERS", {}))
    return out
