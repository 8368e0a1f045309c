"""Suite registry. Modules are imported on demand."""

from __future__ import annotations

import importlib

from ..errors import InputError

SUITES: dict[str, tuple[str, str]] = {
    "charm": ("rolebound.suites.charm.suite", "CharmSuite"),
    "knowledge-errors": ("rolebound.suites.knowledge_errors.suite", "KnowledgeErrorsSuite"),
    "multiverse": ("rolebound.suites.multiverse.suite", "MultiverseSuite"),
    "capability": ("rolebound.suites.capability.suite", "CapabilitySuite"),
    "mcq": ("rolebound.suites.mcq.suite", "MCQSuite"),
}


def available() -> list[str]:
    out = []
    for name, (module, _) in SUITES.items():
        if importlib.util.find_spec(module) is not None:
            out.append(name)
    return out


def get_suite(name: str):
    if name not in SUITES or importlib.util.find_spec(SUITES[name][0]) is None:
        raise InputError(f"unknown suite '{name}'; available: {', '.join(available())}", field="suite")
    module, cls = SUITES[name]
    return getattr(importlib.import_module(module), cls)()
