"""rolebound: does a role-playing LLM stay inside its character's knowledge and capability
boundaries? Benchmarks (charm, knowledge-errors, multiverse, capability), runs, metrics, reports."""

# Before anything can import torch: libgomp reads OMP_WAIT_POLICY once, when torch loads it.
from .threads import set_wait_policy as _set_wait_policy

_set_wait_policy()


def __getattr__(name):  # lazy: importing rolebound must stay cheap (no torch)
    if name == "__version__":       # defined in records.VERSION: no module imports this package
        from .records import VERSION

        return VERSION
    if name in ("run", "build_report", "load_run", "load_manifest"):
        from . import api

        return getattr(api, name)
    if name == "RunRequest":
        from .request import RunRequest

        return RunRequest
    raise AttributeError(name)
