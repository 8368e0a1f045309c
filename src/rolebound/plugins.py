"""Entry points: how a package outside rolebound adds suites, backends, importers and commands.

    [project.entry-points."rolebound.suites"]
    echo = "rolebound_echo:EchoSuite"

Groups: rolebound.suites (a Suite class), rolebound.backends (a Backend class),
rolebound.importers (a module with IMPORTERS), rolebound.commands (a function
register(build_app, data_app)). A suite's own build commands and importers are its hooks
(Suite.build_commands, Suite.importers); the last two groups are for packages without a suite.
Nothing is imported until it is asked for by name.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from importlib import metadata
from typing import Any

SUITES, BACKENDS, IMPORTERS, COMMANDS = ("rolebound.suites", "rolebound.backends",
                                         "rolebound.importers", "rolebound.commands")


def entry_points(group: str) -> dict[str, str]:
    """name -> 'module:attr' for the installed entry points of a group (read once per process)."""
    return {ep.name: ep.value for ep in _installed().select(group=group)}


@functools.cache
def _installed() -> metadata.EntryPoints:
    # every distribution read once: a scan per lookup cost a CLI run about 0.4 s
    return metadata.entry_points()


def module_exists(target: str) -> bool:
    try:
        return importlib.util.find_spec(target.partition(":")[0]) is not None
    except (ImportError, ValueError):
        return False


def load(target: str) -> Any:
    """'pkg.mod:Name' -> the object; 'pkg.mod' -> the module. A plugin that fails to import is
    one clear error, not a traceback."""
    from .errors import RoleboundError

    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RoleboundError(f"cannot load '{target}': {type(exc).__name__}: {exc}") from None
    return obj


def lazy_exports(package: str, names: dict[str, str]):
    """A package's module `__getattr__` that imports each exported name from its submodule on
    first use (`{"CharmSuite": ".suite"}`), so importing a suite package costs nothing until its
    class is asked for."""
    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
