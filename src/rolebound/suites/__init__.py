"""Suite registry: the built-in suites, classes marked @register_suite and the suites other
packages declare as `rolebound.suites` entry points. Modules are imported on demand."""

from __future__ import annotations

from .. import plugins
from ..errors import InputError, did_you_mean

# Built-in suites (imported only when asked for by name).
SUITES: dict[str, str] = {
    "charm": "rolebound.suites.charm:CharmSuite",
    "knowledge-errors": "rolebound.suites.knowledge_errors:KnowledgeErrorsSuite",
    "multiverse": "rolebound.suites.multiverse:MultiverseSuite",
    "capability": "rolebound.suites.capability:CapabilitySuite",
    "mcq": "rolebound.suites.mcq:MCQSuite",
}
_REGISTERED: dict[str, type] = {}


def register_suite(name: str):
    """Class decorator: `@register_suite("echo")` makes the suite runnable by name in this process
    (for `rolebound` to find it, declare it as a `rolebound.suites` entry point)."""
    def deco(cls):
        cls.name = name
        _REGISTERED[name] = cls
        return cls
    return deco


def _targets() -> dict[str, str]:
    # built-in names win, and come first (the card and `rolebound suites` list them in this order)
    return {**SUITES, **{k: v for k, v in plugins.entry_points(plugins.SUITES).items() if k not in SUITES}}


def _present(name: str, target: str) -> bool:
    # a built-in suite's module may be left out of a trimmed install; a plugin that is declared
    # but broken is reported when it is loaded
    return name not in SUITES or plugins.module_exists(target)


def available() -> list[str]:
    names = [n for n, t in _targets().items() if _present(n, t)]
    return names + [n for n in _REGISTERED if n not in names]


def suite_class(name: str) -> type:
    if name in _REGISTERED:
        return _REGISTERED[name]
    target = _targets().get(name)
    if target is None or not _present(name, target):
        raise InputError(f"unknown suite '{name}'{did_you_mean(name, available())}; available: "
                         f"{', '.join(available())}", field="SUITE")
    cls = plugins.load(target)
    from .base import Suite

    if not (isinstance(cls, type) and issubclass(cls, Suite)):
        raise InputError(f"'{target}' (suite '{name}') is not a Suite class", field="SUITE")
    if not getattr(cls, "name", None):
        cls.name = name
    _REGISTERED.setdefault(name, cls)
    return _REGISTERED[name]


def get_suite(name: str):
    return suite_class(name)()
