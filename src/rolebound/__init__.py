"""rolebound: does a role-playing LLM stay inside its character's knowledge and capability
boundaries? Benchmarks (charm, knowledge-errors, multiverse, capability), runs, metrics, reports."""

from .constants import VERSION as __version__  # defined there: no module imports this package

# Before anything can import torch: libgomp reads OMP_WAIT_POLICY once, when torch loads it.
from .threads import set_wait_policy as _set_wait_policy  # noqa: E402

_set_wait_policy()


def __getattr__(name):  # lazy: importing rolebound must stay cheap (no torch)
    if name in ("run", "build_report", "load_run", "load_manifest"):
        from . import api

        return getattr(api, name)
    if name == "RunRequest":
        from .request import RunRequest

        return RunRequest
    raise AttributeError(name)
