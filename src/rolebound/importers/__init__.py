"""Importers for public datasets: `rolebound data import FORMAT SRC --out FILE`.

Each module here exposes IMPORTERS = {format: (function(src, out) -> summary, help)}.
"""

from __future__ import annotations

import importlib
import pkgutil


def all_importers() -> dict:
    out = {}
    for mod in pkgutil.iter_modules(__path__):
        m = importlib.import_module(f"{__name__}.{mod.name}")
        out.update(getattr(m, "IMPORTERS", {}))
    return out
