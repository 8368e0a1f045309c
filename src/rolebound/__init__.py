"""rolebound: does a role-playing LLM stay inside its character's knowledge and capability
boundaries? Benchmarks (charm, knowledge-errors, multiverse, capability), runs, metrics, reports."""

__version__ = "0.1.0"


def __getattr__(name):  # lazy: importing rolebound must stay cheap (no torch)
    if name in ("run", "build_report", "load_run", "load_manifest"):
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
